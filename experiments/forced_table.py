"""Issue 32's table from forced sweeps (experiments/sweeps/forced.yaml), one sweep folder per
model size: per size, level (pages in flight) and strategy, median and mean critical-path
steps, accepted tokens per step, pages/s (measured and the cost model's projection) and P95
latency, each as a ratio to sequential at the same size and level (> 1: better). Read from the
sweeps' result.json files (`treedec compare`'s table); writes forced_table.json and
forced_table.png (pages/s and mean-steps ratios to sequential, a panel per level).

    python experiments/forced_table.py --sweep 0.5b=runs/forced-0.5b --sweep 1.5b=runs/forced-1.5b --out DIR
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from treedec.commands.compare import load_jobs, table

KEYS = ("median_steps", "mean_steps", "accepted_per_step", "pages_per_s", "projected_pages_per_s", "p95_latency_s")


def time_split(jobs: list[dict]) -> dict:
    """Where one job's wall time went (its cost model's parts: forwards, the engine's own work around
    them, the rest) and its steps: which of them a slow step is made of. Empty unless one job matches."""
    if len(jobs) != 1 or not (jobs[0]["summary"].get("cost_model") or {}).get("counts"):
        return {}
    cm = jobs[0]["summary"]["cost_model"]
    steps = cm["counts"]["steps"] or 1
    return {"steps": cm["counts"]["steps"], "wall_s": cm["wall_s"], "forward_s": cm["model_measured_s"],
            "engine_s": cm["engine_s"], "other_s": cm["other_s"],
            "forward_ms_per_step": 1e3 * cm["counts"].get("step_forward_s", 0.0) / steps,
            "engine_ms_per_step": 1e3 * cm["engine_s"] / steps}


def rows_of(size: str, root: str) -> list[dict]:
    jobs = load_jobs([root])
    rows, _, _ = table(jobs, "strategy:sequential")
    levels = {j["summary"].get("concurrency") for j in jobs}  # one level: not a column of compare's table
    only = levels.pop() if len(levels) == 1 else None
    out = []
    for r in rows:
        row = {"size": size, "in_flight": int(r.get("runtime.max_pages") or 0) or only, "strategy": r["strategy"],
               "pages": r["pages"]}
        for k in KEYS:
            row[k] = r.get(k)
            row[f"{k}_vs_sequential"] = r.get(f"{k}_vs_baseline")
        row.update(time_split([j for j in jobs if j["summary"].get("strategy") == r["strategy"]
                               and j["summary"].get("concurrency") == row["in_flight"]]))
        out.append(row)
    return sorted(out, key=lambda x: (x["in_flight"] or 0, x["strategy"]))


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({r["in_flight"] for r in rows}, key=lambda v: v or 0)
    fig, axes = plt.subplots(1, len(levels), figsize=(5.5 * len(levels), 3.8), squeeze=False)
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    for ax, level in zip(axes[0], levels):
        names = list(dict.fromkeys(r["strategy"] for r in rows if r["in_flight"] == level))
        width = 0.8 / (2 * len(sizes))
        for i, size in enumerate(sizes):
            got = {r["strategy"]: r for r in rows if r["in_flight"] == level and r["size"] == size}
            for j, (key, hatch) in enumerate((("pages_per_s_vs_sequential", ""), ("mean_steps_vs_sequential", "//"))):
                xs = [n + (2 * i + j - len(sizes) + 0.5) * width for n in range(len(names))]
                ax.bar(xs, [(got.get(n) or {}).get(key) or 0 for n in names], width, hatch=hatch,
                       label=f"{size} {'pages/s' if not j else 'fewer mean steps'}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        ax.set_ylabel("x sequential (same size, same run)")
        ax.set_title(f"{level} page(s) in flight", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("forced decoding, 12 OmniDocBench demo pages: ratios to sequential", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", required=True, help="SIZE=FOLDER of a forced sweep")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = [row for spec in args.sweep for row in rows_of(*spec.split("=", 1))]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "forced_table.json").write_text(json.dumps({"rows": rows}, indent=1))
    plot(rows, args.out / "forced_table.png")
    cols = ("size", "in_flight", "strategy", "median_steps", "mean_steps", "accepted_per_step", "pages_per_s",
            "projected_pages_per_s", "p95_latency_s", "mean_steps_vs_sequential", "pages_per_s_vs_sequential",
            "p95_latency_s_vs_sequential")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join("-" if r.get(c) is None else f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])
                         for c in cols))
    print(f"wrote {args.out}/forced_table.json, forced_table.png")


if __name__ == "__main__":
    main()
