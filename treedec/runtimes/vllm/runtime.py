"""The vLLM runtime: PaDoc's request-level realization of a strategy on stock vLLM.

Every stream of a page's decoding graph is one vLLM request whose prompt is the stream's
ancestors (`DecodingGraph.context`: image prompt + parent tokens up to the fork point +
the stream's first tokens, e.g. `<CHILD>`), decoded greedily. The root request (the flat
stream for `sequential`, the layout stream for `padoc`) streams its tokens back step by
step; the strategy's own fork rule runs on them, exactly as in the embedded engine, and
each fork submits a branch request between two engine steps, so it is decoded
concurrently with the layout and the other branches (continuous batching). vLLM's
automatic prefix caching stores the shared image + layout prefix once per block
(`block_size` tokens), so a branch prefills only the tail past the last full cached block.

The engine runs in this process (`LLMEngine`, `VLLM_ENABLE_V1_MULTIPROCESSING=0`) so that
one `step()` is one scheduler iteration: a page's `steps` are the iterations in which it
had a request running, the same accounting as the embedded engine's critical path
(prefill included). Tensor parallelism is vLLM's own (`tensor_parallel_size`); data
parallelism runs `data_parallel_size` independent engines in worker processes, each on
its share of the pages (what vLLM's offline data-parallel recipe does for dense models).

Drafting strategies (`hsd`, `padoc_hsd`) run through vLLM's speculative decoding: the
engine gets treedec's `custom_class` proposer (`drafts.py`), which serves the pages'
drafts (refined by HSD stage 1, whose crops this runtime decodes first), written to a
per-engine draft store, as linear chains; greedy verification keeps the base strategy's
pages. MTP strategies (`mtp`, `hpd`) run
their head as a vLLM Medusa draft model on the target's hidden states (`mtp.py`).

`VLLMRuntime` is this runtime's side of the runtime contract (`treedec.runtimes.base`): the
per-page bookkeeping is `treedec.run.parse_pages.parse_pages`, shared with the embedded engine; what
this runtime does differently for a strategy is said once, by `VLLMRuntime.notes` (and in
the run's summary.json `runtime_notes`); what it cannot run, by `VLLMRuntime.check`. What
stock vLLM cannot do for our strategies, and what this backend does instead, is in
treedec/runtimes/README.md.

Real architectures' checkpoints (idefics3, paddleocr_vl, hunyuan_vl here) are served from
their own folder, each request's prompt the chat-template prompt with one image placeholder
(`prompts.py`); what vLLM cannot build here is refused in one line and two measured
differences from transformers are mended (`compat.py`, treedec/runtimes/README.md).

The parts: `engine.py` (config, serving folder, engine), `runner.py` (streams as
requests), `hsd.py` (drafting strategies), `drafts.py` (the page-draft proposer),
`mtp.py` (the MTP head as a Medusa draft model); this file
adapts them to the contract, on one engine or on data-parallel ones.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from treedec.engine.page_decoding import PageDecoding
from treedec.engine.forward_log import ForwardLog
from treedec.errors import UserError
from treedec.models.page_model import ServedPageModel
from treedec.models.vlm import VLM
from treedec.records import RunResult
from treedec.run.parse_pages import parse_pages
from treedec.runtimes.vllm.engine import Served, VLLMConfig, VLLMEngines
from treedec.runtimes.vllm.hsd import draft_engine_cfg, draft_notes, draft_refusal, drafting, write_drafts
from treedec.runtimes.vllm.prompts import checkpoint_folder, text_prompt_ids
from treedec.runtimes.vllm.runner import VLLMRunner
from treedec.strategies.base import Strategy

__all__ = ["VLLMConfig", "VLLMRuntime", "parse_pages_vllm"]

IMAGE_TOKENS = 1024  # a page's image tokens, for the engine's default token budget per step (runtime.max_num_batched_tokens)
TEXT_ROUND = 256  # a checkpoint's prompt text, rounded up to a multiple of this for that budget


class VLLMRuntime:
    """`runtime=vllm`: every stream of a page a vLLM request (module docstring)."""

    name = "vllm"
    pending_inputs = False  # its proposer reads every page's drafts from a store written before decoding
    steps_counted = ("scheduler iterations in which the page had an unfinished request: as the embedded engine's, "
                     "except that an iteration in which the page's request waited (token budget, preemption) or ran "
                     "one chunk of a chunked prefill also counts")

    def __init__(self, cfg: Any = None, model_path: str | Path | None = None, engines: VLLMEngines | None = None):
        """`engines`: another runtime's (`VLLMEngines`), shared with it and closed by it; None:
        this runtime's own, closed by its `close`."""
        self.cfg = VLLMConfig.from_cfg(cfg)
        self.model_path = model_path
        self.engines, self._owns_engines = (engines, False) if engines is not None else (VLLMEngines(), True)
        self.forward_passes = 0
        self._figures: dict[str, Any] = {}

    def _cfg(self, vlm: VLM, strategy: Strategy) -> VLLMConfig:
        """The engine config for `strategy`: a drafting one's installs its drafter (HSD's
        page-draft proposer, or the MTP head as a Medusa draft model)."""
        return draft_engine_cfg(strategy, self.cfg, vlm, self.engines) if drafting(strategy) else self.cfg

    def _served(self, vlm: VLM, strategy: Strategy) -> Served:
        """The engine for treedec's VLM (a serving folder written for it) or for a real
        architecture's checkpoint (its own folder; `prompts.py`)."""
        if not isinstance(vlm, ServedPageModel):
            folder = checkpoint_folder(vlm)  # the page's image tokens are not known before its image: a bound, its
            # text rounded up so that a strategy's stages (crops: layout pass, crop reads; modes' prompts of
            # different lengths) share one engine
            text = -(-len(text_prompt_ids(vlm, strategy.mode)) // TEXT_ROUND) * TEXT_ROUND
            return self.engines.engine(folder, self._cfg(vlm, strategy), text + IMAGE_TOKENS)
        if vlm.spec.positions != "linear":  # vLLM's Idefics3 numbers every input position in one line
            raise UserError(f"runtime=vllm serves treedec's VLM with linear positions only; this checkpoint's image "
                            f"patches have {vlm.spec.positions} positions (treedec/models/planar_rope.py): "
                            "use runtime=embedded")
        return self.engines.engine(self.engines.serving_dir(vlm, self.model_path), self._cfg(vlm, strategy),
                                   len(vlm.prompt_ids(strategy.mode)))

    def check(self, vlm, strategy: Strategy) -> None:
        if self.cfg.data_parallel_size > 1 and not isinstance(vlm, ServedPageModel):
            raise UserError(f"runtime=vllm runs a checkpoint loaded by model_type ({type(vlm).__name__}) on one engine "
                            "here (data_parallel_size=1): the data-parallel workers load treedec's own VLM; use "
                            "tensor_parallel_size, or one run per share of the pages")
        if self.cfg.data_parallel_size > 1 and (strategy.before is not None or strategy.after is not None):
            raise UserError(f"strategy {strategy.name!r} runs stages of its own (treedec.run.stages) on one vLLM engine "
                            "here (data_parallel_size=1): the data-parallel workers rebuild a strategy by name")
        if strategy.drafter is not None and strategy.drafter.drafts_in_forward:
            raise UserError(f"strategy {strategy.name!r} adds placeholder rows to the model's own forward, which "
                            "vLLM's model runner cannot express: use runtime=embedded")
        if drafting(strategy) and (why := draft_refusal(strategy, self.cfg)):
            raise UserError(why)

    def notes(self, strategy: Strategy) -> list[str]:
        return draft_notes(strategy)

    def prepare(self, vlm, strategy: Strategy, samples: Iterable) -> Iterable:
        """A draft source that knows the pages' drafts ahead (HSD's pages, stage 1's crops): its
        `sequences` written to the engine's draft store before decoding (vLLM's proposer reads the
        store). MTP strategies: nothing (the head drafts inside the engine)."""
        if not drafting(strategy) or strategy.needs_hidden:
            return samples
        samples = list(samples) if iter(samples) is samples else samples  # read for their names, then decoded
        write_drafts(self._served(vlm, strategy).drafts, vlm, strategy, samples)
        return samples

    def prompt(self, vlm, strategy: Strategy, sample) -> Any:
        return sample.image  # vLLM's processor builds the pixels (the same as the embedded engine's)

    def decode(self, vlm, strategy: Strategy, items: Iterable, in_flight: int | None = None,
               log: ForwardLog | None = None) -> Iterator[PageDecoding]:
        """`log` stays empty: vLLM's forwards are its own (its runs have no cost model)."""
        served = self._served(vlm, strategy)
        served.engine.reset_prefix_cache()  # no page starts warm from an earlier run: figures stay comparable
        cfg = self._cfg(vlm, strategy)
        runner = VLLMRunner(served, vlm, strategy, replace(cfg, max_pages=in_flight) if in_flight else cfg)
        try:
            yield from runner.run(items)
        finally:
            if served.drafts is not None:
                served.drafts.clear()  # no later run on this engine sees these pages' drafts
        self.forward_passes += runner.forward_passes  # a running total (treedec.runtimes.base.Runtime)
        self._figures = {"prefix_cache_prompt_tokens": runner.prompt_tokens,
                         "prefix_cache_cached_tokens": runner.cached_tokens}

    def figures(self) -> dict[str, Any]:
        return dict(self._figures)

    def run(self, vlm, strategy: Strategy, samples: Iterable, **kwargs) -> RunResult:
        """`parse_pages` on this runtime: on one engine (started before the clock), or on
        `data_parallel_size` engines in worker processes."""
        self.check(vlm, strategy)
        if self.cfg.data_parallel_size > 1:
            model_dir = self.engines.serving_dir(vlm, self.model_path)
            return _parse_pages_dp(vlm, strategy, list(samples), self.cfg, model_dir, kwargs.get("progress", True),
                                   kwargs.get("warmup", True))
        self._served(vlm, strategy)  # an engine takes 20-90 s to start: not the pages' time
        return parse_pages(vlm, strategy, samples, self, **kwargs)

    def close(self) -> None:
        """Its own engines shut down and their folders removed (shared ones: their owner's to close)."""
        if self._owns_engines:
            self.engines.close()


def parse_pages_vllm(vlm: VLM, strategy: Strategy, samples: Iterable, cfg: Any = None,
                     model_path: str | Path | None = None, progress: bool = True, warmup: bool = True) -> RunResult:
    """`treedec.run.parse_pages.parse_pages` on vLLM: the same `RunResult` of `PageRecord`s (steps =
    engine steps in which the page had a request running, prefill included). One run: a
    strategy with stages runs with `treedec.run.stages.run_strategy(VLLMRuntime(...), ...)`."""
    runtime = VLLMRuntime(cfg, model_path)
    try:
        return runtime.run(vlm, strategy, samples, progress=progress, warmup=warmup)
    finally:
        runtime.close()


def _dp_worker(args):
    """One data-parallel rank: its own engine on its share of the pages."""
    model_dir, strategy_name, samples, cfg, progress, warmup = args
    import torch

    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(int(cfg.threads))

    vlm = VLM.load(model_dir)
    strategy = STRATEGIES.get(strategy_name)(vlm.tokenizer)
    return parse_pages_vllm(vlm, strategy, samples, cfg, model_path=model_dir, progress=progress, warmup=warmup)


def _parse_pages_dp(vlm, strategy, samples, cfg: VLLMConfig, model_dir: Path, progress, warmup) -> RunResult:
    """`data_parallel_size` engines in spawned processes, pages dealt round robin; wall
    time is the slowest rank's (ranks start together), forward passes are summed."""
    import multiprocessing as mp

    n = cfg.data_parallel_size
    rank_cfg = replace(cfg, data_parallel_size=1)
    shards = [samples[i::n] for i in range(n)]
    with mp.get_context("spawn").Pool(n) as pool:
        parts = pool.map(_dp_worker, [(str(model_dir), strategy.name, shard, rank_cfg, progress and i == 0, warmup)
                                      for i, shard in enumerate(shards) if shard])
    by_name = {r.name: r for part in parts for r in part.records}
    return RunResult(strategy.name, [by_name[s.name] for s in samples], max(p.wall_s for p in parts),
                     sum(p.forward_passes for p in parts), runtime="vllm", notes=VLLMRuntime(cfg).notes(strategy),
                     before_s=max(p.before_s for p in parts))  # ranks start together: the slowest one's
