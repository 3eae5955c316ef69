"""`run executor=ray` measured against one process (docs/ray.md): each run a fresh process, timed
end to end (start-up, Ray's start, the actors' model loading, reading, drafting, decoding and
writing), run after run in one sitting, ratios within it.

    python experiments/ray_bench.py --out runs/ray-bench            # forced 30m on the demo pages
    python experiments/ray_bench.py --size 1m --pages 4 --out /tmp/x # a quick look

Rows: sequential in one process of two threads against two decoder actors of one thread each;
hsd the same, then with 1 and 2 drafter actors; Ray's own overhead: the shipped tiny model on
16 synthetic pages, one process of two threads against one decoder of two threads on Ray
(start-up and serialisation: what Ray adds). pages/s = pages / the command's wall time.

Run it on a quiet machine; the output names its CPU (`treedec.cpu`). OUT/results.json, OUT/table.md."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"


def runs(size: str, pages: int) -> list[tuple[str, list[str], int]]:
    """(row, the run's arguments, its pages)."""
    forced = ["model=forced", f"model.size={size}", "data=omnidocbench", f"data.root={DEMO}", f"data.limit={pages}"]
    ray = ["executor=ray", "ray.num_cpus=2", "runtime.threads=1"]
    tiny = ["data.pages=16", "strategy=sequential"]
    return [("sequential: 1 process, 2 threads", [*forced, "strategy=sequential", "runtime.threads=2"], pages),
            ("sequential: 2 decoders x 1 thread", [*forced, "strategy=sequential", *ray, "ray.decoders=2"], pages),
            ("hsd: 1 process, 2 threads", [*forced, "strategy=hsd", "runtime.threads=2"], pages),
            ("hsd: 2 decoders, 1 drafter", [*forced, "strategy=hsd", *ray, "ray.decoders=2", "ray.drafters=1"], pages),
            ("hsd: 2 decoders, 2 drafters", [*forced, "strategy=hsd", *ray, "ray.decoders=2", "ray.drafters=2"], pages),
            ("overhead: tiny, 1 process, 2 threads", [*tiny, "runtime.threads=2"], 16),
            ("overhead: tiny, 1 decoder x 2 threads on Ray", [*tiny, "executor=ray", "ray.num_cpus=2",
                                                              "runtime.threads=2", "ray.decoders=1",
                                                              "ray.cpus_per_decoder=1"], 16)]


def timed(args: list[str], out: Path) -> dict:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "treedec", "run", *args, f"out={out}", "resume=false"], cwd=ROOT,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"run {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    s = json.loads((out / "summary.json").read_text())
    return {"wall_s": round(wall, 2), "accepted_per_step": s.get("accepted_per_step"), "ray": s.get("ray")}


def table(rows: list[dict]) -> str:
    lines = ["| run | pages | wall s | pages/s | x first of its group | bound by |", "|---|---|---|---|---|---|"]
    base: dict[str, float] = {}
    for r in rows:
        group = r["row"].split(":")[0]
        pps = r["pages"] / r["wall_s"]
        base.setdefault(group, pps)
        bound = (r["ray"] or {}).get("passes", [{}])[0].get("bound_by", "") if r["ray"] else ""
        lines.append(f"| {r['row']} | {r['pages']} | {r['wall_s']:.1f} | {pps:.3f} | {pps / base[group]:.2f} | "
                     f"{bound} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="30m")
    p.add_argument("--pages", type=int, default=12)
    p.add_argument("--out", type=Path, default=Path("runs/ray-bench"))
    args = p.parse_args()
    from treedec.cpu import cpu_info

    rows = []
    for i, (row, run_args, pages) in enumerate(runs(args.size, args.pages)):
        rows.append({"row": row, "pages": pages, **timed(run_args, args.out / f"run{i}")})
        print(rows[-1]["row"], rows[-1]["wall_s"], flush=True)
    cpu = cpu_info()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"cpu": cpu, "size": args.size, "rows": rows}, indent=1))
    text = table(rows) + f"\nCPU: {cpu['model']} ({cpu['kind']}), {cpu['cores']} cores\n"
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
