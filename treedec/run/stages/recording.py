"""The token ids a runtime decoded, page by page: what lossless checks compare.

`run_with_ids(runtime, vlm, strategy, pages)` runs the strategy on `runtime` (each of its
stages a `runtime.run`: `treedec.run.stages.run_strategy`) with the runtime's `decode` wrapped, so
what is recorded is what the decoder returned (vLLM: the ids it streamed), not text made from
them; a stage's pages (stage 1's crops) are recorded too. Used by the id-for-id tests (tests/test_vllm_*.py) and by
experiments/probes/same_ids.py (removed after a15f6a0: `git show a15f6a0:experiments/probes/same_ids.py`).
"""
from __future__ import annotations

from treedec.run.stages.run import run_strategy


def stream_ids(graph) -> list[tuple]:
    """A page's decoding graph as token ids: per stream (parent, fork point, label, ids)."""
    return [(s.parent, s.fork_at, s.label, list(s.tokens)) for s in graph.streams]


def run_with_ids(runtime, vlm, strategy, pages):
    """(the RunResult, {page name: `stream_ids`}). A warm-up's page is overwritten by the timed run."""
    ids: dict[str, list[tuple]] = {}
    decode = runtime.decode

    def recording(*args, **kwargs):
        for r in decode(*args, **kwargs):
            ids[r.name] = stream_ids(r.graph)
            yield r

    runtime.decode = recording
    try:
        return run_strategy(runtime, vlm, strategy, pages, progress=False), ids
    finally:
        runtime.decode = decode
