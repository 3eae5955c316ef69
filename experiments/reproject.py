"""A run's cost-model projection made again, in a fresh process, from the run's own counts
(summary.json's `cost_model.counts`) with this checkout's step probes and engine: to check a
fix of the probes (or of the forwards they time) without decoding again. A RE-PROJECTION,
labelled so wherever it is reported: the run's measured pages/s came from the code it ran with.

    python experiments/reproject.py runs/exp-forced-0.1b-gqa/strategy=sequential [--budget 60] [--out FILE]

Reads the job's config.yaml (model, data, strategy, runtime), times the probes as this checkout's
calibration picks them (experiments/recalibrate.py, same budget rule unless --budget; a run made before
a change of the rule timed other buckets), projects
(`project`) with the run's measured engine and other seconds, and prints (and writes with --out)
the measured pages/s, the run's projection, the re-projection, the share of the run's step forwards
the timed buckets held (the run's and the re-projection's) and each timed bucket's probe time beside
the run's own CPU seconds a step there."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from treedec.engine.forward_log import ForwardLog
from treedec.results.cost_model import project, step_share
from recalibrate import load_job_model, read_job, recalibrate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a job's folder (summary.json, .hydra/config.yaml)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of probing (default: the run's rule)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    summary, cfg = read_job(a.run)
    cm = summary["cost_model"]
    log = ForwardLog(**cm["counts"])
    vlm, samples = load_job_model(cfg)
    costs = recalibrate(vlm, samples, cfg, log, summary["concurrency"], budget_s=a.budget)
    again = project(log, costs, summary["pages"], cm["wall_s"])
    measured = summary["pages_per_s"]

    def error(p):
        return None if p is None or not measured else p / measured - 1

    out = {"run": str(a.run), "strategy": summary["strategy"], "pages_per_s": measured,
           "run_projection": summary.get("projected_pages_per_s"),
           "run_projection_error": error(summary.get("projected_pages_per_s")),
           "reprojected_pages_per_s": again["projected_pages_per_s"],
           "reprojection_error": error(again["projected_pages_per_s"]),
           "timed_share": costs.get("timed_share"),
           "run_timed_share": step_share(log, [d["bucket"] for d in cm["costs"].get("bucket_points", [])]),
           "buckets": [{k: d.get(k) for k in ("bucket", "pages", "rows", "keys_per_page", "run_cpu_s", "time_s")}
                       for d in costs.get("bucket_points", [])],
           "run_buckets": [{k: d.get(k) for k in ("bucket", "run_cpu_s", "time_s")}
                           for d in cm["costs"].get("bucket_points", [])]}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
