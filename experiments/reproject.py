"""A run's cost-model projection made again, in a fresh process, from the run's own counts
(summary.json's `cost_model.counts`) with this checkout's step probes and engine: to check a
fix of the probes (or of the forwards they time) without decoding again. A RE-PROJECTION,
labelled so wherever it is reported: the run's measured pages/s came from the code it ran with.

    python experiments/reproject.py runs/exp-forced-0.1b-gqa/strategy=sequential [--budget 60] [--out FILE]

Reads the job's .hydra/config.yaml (model, data, strategy, runtime), times the probes as the run's
own calibration did (`treedec.cost_model.calibrate`, same budget rule unless --budget), projects
(`project`) with the run's measured engine and other seconds, and prints (and writes with --out)
the measured pages/s, the run's projection, the re-projection and each timed bucket's probe time
beside the run's own CPU seconds a step there."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from omegaconf import OmegaConf

from treedec.cost_model import calibrate, project
from treedec.data import open_dataset
from treedec.engine.pass_log import PassLog
from treedec.models.loader import load_vlm
from treedec.strategies.base import build_strategy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a job's folder (summary.json, .hydra/config.yaml)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of probing (default: the run's rule)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    summary = json.loads((a.run / "summary.json").read_text())
    cfg = OmegaConf.load(a.run / ".hydra" / "config.yaml")
    torch.set_num_threads(int(cfg.runtime.threads))
    cm = summary["cost_model"]
    log = PassLog(**cm["counts"])
    vlm = load_vlm(cfg.model)
    samples = list(open_dataset(cfg.data, model_pages=vlm.pages))
    mode = build_strategy(OmegaConf.to_container(cfg.strategy), vlm.tokenizer).mode
    costs = calibrate(vlm, mode, samples, log, int(summary["concurrency"]),
                      float(cfg.runtime.get("dense_waste", 4.0)), budget_s=a.budget)
    again = project(log, costs, summary["pages"], cm["wall_s"])
    measured = summary["pages_per_s"]

    def error(p):
        return None if p is None or not measured else p / measured - 1

    out = {"run": str(a.run), "strategy": summary["strategy"], "pages_per_s": measured,
           "run_projection": summary.get("projected_pages_per_s"),
           "run_projection_error": error(summary.get("projected_pages_per_s")),
           "reprojected_pages_per_s": again["projected_pages_per_s"],
           "reprojection_error": error(again["projected_pages_per_s"]),
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
