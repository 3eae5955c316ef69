"""`run_strategy`: a strategy run end to end on a runtime. Without stages, one `runtime.run`;
with stages (`Strategy.before`: HSD; `Strategy.after`: `crops`), each stage's model run one
`runtime.run` (`before.py`, `after.py`), merged into one `RunResult` (`merge.py`). The
warm-up runs the whole strategy on one page, untimed, its drafts from an empty cache of its own."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Iterable

from treedec.records import PageRecord, RunResult
from treedec.run.stages.after import read_after
from treedec.run.stages.before import decode_drafted
from treedec.runtimes.base import Runtime
from treedec.strategies.base import Strategy


def run_strategy(runtime: Runtime, vlm, strategy: Strategy, samples: Iterable, progress: bool = True,
                 warmup: bool = True, cold_drafts: bool = True,
                 on_record: Callable[[PageRecord], None] | None = None) -> RunResult:
    """`strategy` on every sample, on `runtime`. `cold_drafts`: pages drafted from an empty
    cache (unless the strategy names its own cache folder), so drafting's cost is in the
    figures; `on_record` sees each page as it is final (stage-1 figures in it)."""
    if strategy.before is None and strategy.after is None:
        return runtime.run(vlm, strategy, samples, progress=progress, warmup=warmup, on_record=on_record)
    runtime.check(vlm, strategy)
    if iter(samples) is samples:  # every stage reads the pages: a one-shot iterator is read once, kept
        samples = list(samples)
    warmup_s = 0.0
    first = next((s for s in samples if s.image is not None), None)
    if warmup and first is not None:
        t = time.perf_counter()
        _stages(runtime, vlm, strategy, [first], False, cold_drafts, None)
        warmup_s = time.perf_counter() - t
    res = _stages(runtime, vlm, strategy, samples, progress, cold_drafts, on_record)
    res.warmup_s = warmup_s
    return res


def _stages(runtime: Runtime, vlm, strategy: Strategy, samples, progress: bool, cold: bool, on_record) -> RunResult:
    pages = replace(strategy, before=None, after=None)  # the page decode: the same draft source, no stages
    if strategy.before is not None:
        return decode_drafted(runtime, vlm, strategy.before, pages, samples, progress, cold, on_record)
    return read_after(runtime, vlm, strategy.after, pages, samples, progress, on_record, cold)
