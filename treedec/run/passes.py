"""One decoding pass of `run`: a strategy over the pages with a given number in flight, on the
configured runtime, end to end (pages read, decoded, outputs written), its step costs projected
when the cost model is asked for (`cost_model=true`)."""
from __future__ import annotations

import tempfile
import time

from omegaconf import DictConfig, OmegaConf

from treedec.results.cost_model import calibrate, project
from treedec.engine.engine import EngineConfig
from treedec.models.loader import checkpoint_path
from treedec.run.outputs import RunOutput
from treedec.records import RunResult
from treedec.runtimes.base import Runtime
from treedec.runtimes.select import make_runtime
from treedec.run.stages import run_strategy
from treedec.formats.declare import model_format
from treedec.strategies.base import build_strategy


def run_pass(strategy_cfg, vlm, samples, cfg, level: int, progress: bool = True, on_record=None,
             beside: Runtime | None = None) -> RunResult:
    """Decode `samples` with `level` pages in flight (runtime.max_pages for this run), end to
    end: every run reads its pages itself (timed as the phase "load" as the engine pulls
    them) and writes its outputs: the pass whose pages `on_record` writes as they finish
    (embedded runtime) times that as its phase "write"; any other pass is charged the time to
    write its outputs into a scratch folder. `beside`: a runtime whose engines the pass shares."""
    strategy = build_strategy(strategy_cfg, vlm.tokenizer, model_format(cfg.model, vlm))  # the model's output format
    res = decode_pass(strategy, vlm, samples, cfg, level, progress, on_record, beside)
    res = res if on_record and res.phases.get("write") else charge_write(res)
    if res.forwards is not None and cfg.get("cost_model", False):  # projected_pages_per_s (treedec.results.cost_model)
        costs = calibrate(vlm, strategy.mode, samples, res.forwards, level, dense_waste(cfg))
        res.projection = project(res.forwards, costs, sum(1 for r in res.records if r.steps), res.wall_s)
    return res


def decode_pass(strategy, vlm, samples, cfg, level: int, progress: bool, on_record=None,
                beside: Runtime | None = None) -> RunResult:
    """One pass on the configured runtime (`runtime=embedded|vllm`) with `level` pages in flight
    (sharing the engines of `beside`, when given)."""
    runtime = make_runtime(OmegaConf.merge(cfg.runtime, {"max_pages": level}), checkpoint_path(cfg.model), beside)
    try:
        return run_strategy(runtime, vlm, strategy, samples, progress=progress,
                            cold_drafts=bool(cfg.get("cold_drafts", True)), on_record=on_record)
    finally:
        runtime.close()  # its own engines only: those of `beside` are its to close


def charge_write(res: RunResult) -> RunResult:
    """A run made end to end: writing its outputs (`write_seconds`) added to its wall time and phases."""
    res.charge("write", write_seconds(res))
    return res


def write_seconds(res: RunResult) -> float:
    """Seconds to write a run's page outputs (figures, OmniDocBench JSON, Markdown), as `run` does."""
    with tempfile.TemporaryDirectory(prefix="treedec-write-") as d:
        out = RunOutput(d)
        t = time.perf_counter()
        for rec in res.records:
            out.page(rec.name, rec.figures(), rec.page)
        return time.perf_counter() - t


def dense_waste(cfg: DictConfig) -> float:
    """A run's rule for dense attention (runtime.dense_waste), the engine's default where its config has none."""
    return float(cfg.runtime.get("dense_waste", EngineConfig.dense_waste))
