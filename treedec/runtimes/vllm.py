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
engine gets treedec's `custom_class` proposer (`vllm_drafts.py`), which serves the pages'
drafts, written to a per-engine draft store, as linear chains (HSD's stage 1 is skipped);
greedy verification keeps the base strategy's pages.

What stock vLLM cannot do for our strategies, and what this backend does instead, is in
README.md beside this file.

The parts: `vllm_engine.py` (config, serving folder, engine), `vllm_runner.py` (streams as
requests), `vllm_hsd.py` (drafting strategies), `vllm_drafts.py` (the proposer); this file
parses pages with them, on one engine or on data-parallel ones.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from treedec.errors import UserError
from treedec.models.vlm import VLM
from treedec.runtimes.vllm_engine import VLLMConfig, get_engine, serving_dir
from treedec.runtimes.vllm_hsd import draft_engine_cfg, draft_refusal, drafting, write_drafts
from treedec.runtimes.vllm_runner import VLLMRunner
from treedec.strategies.base import Strategy

__all__ = ["VLLMConfig", "parse_pages_vllm"]


def parse_pages_vllm(vlm: VLM, strategy: Strategy, samples: Iterable, cfg: Any = None,
                     model_path: str | Path | None = None, progress: bool = True, warmup: bool = True):
    """`treedec.runner.parse_pages` on vLLM: the same `RunResult` of `PageRecord`s (steps =
    engine steps in which the page had a request running, prefill included)."""
    from treedec.runner import RunResult, _record, split_readable

    cfg = VLLMConfig.from_cfg(cfg)
    if strategy.after_decode:
        raise UserError(f"strategy {strategy.name!r} works on the pages after decoding (Strategy.after_decode), "
                        "which the vLLM runtime does not run: use runtime=embedded")
    samples = list(samples)
    if drafting(strategy):  # HSD: page drafts through vLLM's speculative decoding (vllm_drafts.py)
        why = draft_refusal(strategy, cfg)
        if why:
            raise UserError(why)
        cfg = draft_engine_cfg(strategy, cfg)
    if cfg.data_parallel_size > 1:
        return _parse_pages_dp(vlm, strategy, samples, cfg, model_path, progress, warmup)
    from tqdm import tqdm

    records, items = split_readable(samples, lambda s: s.image)
    engine = get_engine(serving_dir(vlm, model_path), cfg, len(vlm.prompt_ids(strategy.mode)))
    t_draft = time.perf_counter()
    before = write_drafts(engine, vlm, strategy, samples) if drafting(strategy) else {}
    t_draft = time.perf_counter() - t_draft  # drafting (pipeline OCR) is on the pages' path: in wall time
    try:
        if warmup and items:
            list(VLLMRunner(engine, vlm, strategy, cfg).run(items[:1]))
        engine.reset_prefix_cache()  # no page starts warm from an earlier run: figures stay comparable
        runner = VLLMRunner(engine, vlm, strategy, cfg)
        bar = tqdm(total=len(items), desc=f"{strategy.name} (vllm)", unit="page", disable=not progress)
        t0 = time.perf_counter()
        for r in runner.run(items):
            records[r.name] = _record(r, strategy)
            records[r.name].extra = {**before.get(r.name, {}), **runner.cache_figures.pop(r.name, {})}
            bar.update(1)
        wall = time.perf_counter() - t0 + t_draft
        bar.close()
    finally:
        if drafting(strategy):
            engine.treedec_drafts.clear()  # no later run on this engine sees these pages' drafts
    result = RunResult(strategy.name, [records[s.name] for s in samples], wall, runner.forward_passes)
    result.prefix_cache = {"prompt_tokens": runner.prompt_tokens, "cached_tokens": runner.cached_tokens}  # type: ignore[attr-defined]
    return result


def _dp_worker(args):
    """One data-parallel rank: its own engine on its share of the pages."""
    model_dir, strategy_name, samples, cfg, progress, warmup = args
    import torch

    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(int(cfg.threads))

    vlm = VLM.load(model_dir)
    strategy = STRATEGIES.get(strategy_name)(vlm.tokenizer)
    return parse_pages_vllm(vlm, strategy, samples, cfg, model_path=model_dir, progress=progress, warmup=warmup)


def _parse_pages_dp(vlm, strategy, samples, cfg: VLLMConfig, model_path, progress, warmup):
    """`data_parallel_size` engines in spawned processes, pages dealt round robin; wall
    time is the slowest rank's (ranks start together), forward passes are summed."""
    import multiprocessing as mp
    from dataclasses import replace

    from treedec.runner import RunResult

    n = cfg.data_parallel_size
    model_dir = serving_dir(vlm, model_path)
    rank_cfg = replace(cfg, data_parallel_size=1)
    shards = [samples[i::n] for i in range(n)]
    with mp.get_context("spawn").Pool(n) as pool:
        parts = pool.map(_dp_worker, [(str(model_dir), strategy.name, shard, rank_cfg, progress and i == 0, warmup)
                                      for i, shard in enumerate(shards) if shard])
    by_name = {r.name: r for part in parts for r in part.records}
    return RunResult(strategy.name, [by_name[s.name] for s in samples], max(p.wall_s for p in parts),
                     sum(p.forward_passes for p in parts))
