"""A finished job's step costs timed again in a later process, from its folder: the resolved
`config.yaml` (model, data, strategy, runtime) and `summary.json`'s counts, calibrated as the
run calibrated itself (`treedec.results.cost_model.calibrate`), with the job's model or the same model
at another size. Imported by experiments/reproject.py (a probe fix checked without decoding
again) and experiments/break_even.py (a job's counts timed per model size)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from treedec.data import open_dataset
from treedec.engine.forward_log import ForwardLog
from treedec.models.loader import load_vlm
from treedec.results.cost_model import calibrate
from treedec.run.passes import dense_waste
from treedec.strategies.base import build_strategy


def read_job(job: Path) -> tuple[dict[str, Any], DictConfig]:
    """A job folder's summary.json and resolved config.yaml."""
    return json.loads((job / "summary.json").read_text()), OmegaConf.load(job / "config.yaml")


def load_job_model(cfg: DictConfig, size: str | None = None, overrides: dict | None = None) -> tuple[Any, list]:
    """The job's model (a forced model's `size` replaced when given) and its pages, with torch's
    threads set as the job ran. `overrides`: config keys replaced first (e.g. {"model": {"device":
    "cuda", "dtype": "bfloat16"}, "data": {"root": ...}}: the job's counts timed on another machine)."""
    if overrides:
        cfg = OmegaConf.merge(cfg, overrides)
    torch.set_num_threads(int(cfg.runtime.threads))
    vlm = load_vlm(cfg.model if size is None else OmegaConf.merge(cfg.model, {"size": size}))
    return vlm, list(open_dataset(cfg.data, model_pages=vlm.pages))


def recalibrate(vlm, samples: list, cfg: DictConfig, log: ForwardLog, in_flight: int, **kwargs) -> dict[str, Any]:
    """`calibrate`'s times for a job's passes `log` (`ForwardLog(**` summary.json's cost_model.counts `)`) with
    `vlm`, at the job's prompt mode, pages in flight and dense-attention rule; `kwargs`: budget_s, apart, memo."""
    mode = build_strategy(OmegaConf.to_container(cfg.strategy), vlm.tokenizer).mode
    return calibrate(vlm, mode, samples, log, int(in_flight),
                     dense_waste(cfg), **kwargs)
