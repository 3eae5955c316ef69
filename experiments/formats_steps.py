"""Issue 56.9's step figures from a formats sweep (experiments/sweeps/formats.yaml): per output format
and strategy, median and mean steps (and x fewer than the format's own sequential), accepted tokens
per step, text_edit_vs_truth, pages flagged, and how many pages equal sequential's in the same
format (the page's Markdown, `pages/*.md`: under forcing every strategy must return them). Step
counts only, no pages/s: read from the sweep's result.json files (`treedec compare`'s table) and
page files; writes steps.json and steps.md to --out. With --sizes DIR (a sweep over model.size, one
format): whether each page's steps, accepted tokens and Markdown are the same at every size (size.json).

    python experiments/formats_steps.py --sweep runs/exp-formats-1m [MORE_STORES] --out docs/figures/formats_steps_1m
    python experiments/formats_steps.py --sizes runs/verify-size --out docs/figures/formats_steps_1m
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from treedec.commands.compare import load_jobs, table

ORDER = ("treedec", "hpd", "markdown", "dots_json", "doctags")
STRATEGIES = ("sequential", "hsd", "padoc", "padoc_hsd")


def pages_of(folder: str) -> dict[str, str]:
    """A job's decoded pages as Markdown, by page name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((Path(folder) / "pages").glob("*.md"))}


def rows_of(roots: list[str]) -> list[dict]:
    jobs = load_jobs(roots)
    rows, _, _ = table(jobs, "strategy:sequential")
    folders = {(j["params"].get("model.format"), j["summary"].get("strategy")): j["dir"] for j in jobs}
    out = []
    for r, j in zip(rows, jobs):
        fmt, strategy = j["params"].get("model.format"), r["strategy"]
        mine, base = pages_of(j["dir"]), pages_of(folders.get((fmt, "sequential"), j["dir"]))
        s = j["summary"]
        out.append({"format": fmt, "strategy": strategy, "pages": r["pages"],
                    "median_steps": r["median_steps"], "mean_steps": r["mean_steps"],
                    "median_steps_x": r.get("median_steps_vs_baseline"), "mean_steps_x": r.get("mean_steps_vs_baseline"),
                    "accepted_per_step": r.get("accepted_per_step"), "text_edit_vs_truth": s.get("text_edit_vs_truth"),
                    "pages_flagged": s.get("pages_flagged"),
                    "pages_as_sequential": sum(mine.get(k) == v for k, v in base.items()), "pages_decoded": len(mine)})
    key = {(f, st): i for i, (f, st) in enumerate((f, st) for f in ORDER for st in STRATEGIES)}
    return sorted(out, key=lambda x: key.get((x["format"], x["strategy"]), len(key)))


def size_check(root: str) -> dict:
    """Per strategy and page, steps and accepted tokens at each model size, and whether they and the
    page's Markdown are the same at every size."""
    out: dict = {}
    for j in load_jobs([root]):
        size, strategy = j["params"].get("model.size"), j["summary"].get("strategy")
        for page in sorted((Path(j["dir"]) / "pages").glob("*.json")):
            if page.name.endswith(".omnidocbench.json"):
                continue
            rec = json.loads(page.read_text(encoding="utf-8"))
            md = page.with_suffix(".md").read_text(encoding="utf-8")
            out.setdefault(strategy, {}).setdefault(rec["name"], {})[size] = {
                "steps": rec["steps"], "accepted_tokens": rec["accepted_tokens"], "md": md}
    for pages in out.values():
        for sizes in pages.values():
            figures = [(v["steps"], v["accepted_tokens"], v["md"]) for v in sizes.values()]
            sizes["same"] = len(figures) > 1 and len(set(figures)) == 1
            for v in sizes.values():
                if isinstance(v, dict):
                    v.pop("md")
    return out


def markdown(rows: list[dict]) -> str:
    def num(v, f):
        return "-" if v is None else format(v, f)

    lines = ["| format | strategy | median steps | mean steps | x fewer median / mean | accepted/step | "
             "text_edit_vs_truth | flagged | pages as sequential's |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['format']} | {r['strategy']} | {num(r['median_steps'], '.0f')} | {num(r['mean_steps'], '.0f')} "
                     f"| {num(r['median_steps_x'], '.2f')} / {num(r['mean_steps_x'], '.2f')} "
                     f"| {num(r['accepted_per_step'], '.2f')} | {num(r['text_edit_vs_truth'], '.4f')} "
                     f"| {num(r['pages_flagged'], 'd')} | {r['pages_as_sequential']}/{r['pages_decoded']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", nargs="+", help="the formats sweep's store(s) (out=)")
    ap.add_argument("--sizes", help="a sweep over model.size in one format (out=)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.sizes:
        check = size_check(args.sizes)
        (out / "size.json").write_text(json.dumps({"sweep": args.sizes, "strategies": check}, indent=1) + "\n",
                                       encoding="utf-8")
        print(json.dumps(check, indent=1))
    if not args.sweep:
        return
    rows = rows_of(args.sweep)
    (out / "steps.json").write_text(json.dumps({"sweep": args.sweep, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    (out / "steps.md").write_text(markdown(rows), encoding="utf-8")
    print(markdown(rows))


if __name__ == "__main__":
    main()
