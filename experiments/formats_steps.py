"""Issue 56.9's step figures from a formats sweep (experiments/sweeps/formats.yaml): per output format
and strategy, median and mean steps (and x fewer than the format's own baseline: sequential, or crops
for a two-stage format, mineru and paddleocr, the baseline job of the same store), accepted tokens
per step, text_edit_vs_truth, pages flagged, and how many pages equal the baseline's in the same
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
from treedec.formats import get_format

ORDER = ("treedec", "hpd", "markdown", "dots_json", "doctags", "mineru", "paddleocr")
STRATEGIES = ("sequential", "hsd", "padoc", "padoc_hsd", "crops")


def baseline_of(fmt: str | None) -> str:
    """The strategy a format's jobs are measured against (`treedec.formats.Format.baseline`)."""
    return get_format(fmt).baseline if fmt else "sequential"


def pages_of(folder: str) -> dict[str, str]:
    """A job's decoded pages as Markdown, by page name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((Path(folder) / "pages").glob("*.md"))}


def rows_of(roots: list[str]) -> list[dict]:
    """One row a job; each job against its format's baseline job in the same store (ratios and pages)."""
    groups: dict[tuple, list[dict]] = {}
    for j in load_jobs(roots):
        groups.setdefault((j["sweep"], j["params"].get("model.format")), []).append(j)
    out = []
    for (_, fmt), jobs in groups.items():
        baseline = baseline_of(fmt)
        rows, _, _ = table(jobs, f"strategy:{baseline}")
        base_dir = next((j["dir"] for j in jobs if j["summary"].get("strategy") == baseline), None)
        base = pages_of(base_dir) if base_dir else None
        for r, j in zip(rows, jobs):
            mine, s = pages_of(j["dir"]), j["summary"]
            out.append({"format": fmt, "strategy": r["strategy"], "baseline": baseline, "pages": r["pages"],
                        "median_steps": r["median_steps"], "mean_steps": r["mean_steps"],
                        "median_steps_x": r.get("median_steps_vs_baseline"),
                        "mean_steps_x": r.get("mean_steps_vs_baseline"),
                        "accepted_per_step": r.get("accepted_per_step"),
                        "text_edit_vs_truth": s.get("text_edit_vs_truth"), "pages_flagged": s.get("pages_flagged"),
                        "pages_as_baseline": None if base is None else sum(mine.get(k) == v for k, v in base.items()),
                        "pages_decoded": len(mine)})
    def rank(name, names):
        return names.index(name) if name in names else len(names)

    return sorted(out, key=lambda x: (rank(x["format"], ORDER), x["strategy"] != x["baseline"],
                                      rank(x["strategy"], STRATEGIES)))


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
             "text_edit_vs_truth | flagged | pages as baseline's |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['format']} | {r['strategy']} | {num(r['median_steps'], '.0f')} | {num(r['mean_steps'], '.0f')} "
                     f"| {num(r['median_steps_x'], '.2f')} / {num(r['mean_steps_x'], '.2f')} "
                     f"| {num(r['accepted_per_step'], '.2f')} | {num(r['text_edit_vs_truth'], '.4f')} "
                     f"| {num(r['pages_flagged'], 'd')} | {num(r['pages_as_baseline'], 'd')}/{r['pages_decoded']} |")
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
