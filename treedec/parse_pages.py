"""Parse pages with a strategy on a runtime: samples in, a `RunResult` of `PageRecord`s out
(treedec.records). `parse_pages` is the one copy of the per-page bookkeeping every runtime
shares (`treedec.runtimes.base.Runtime`: `runtime=embedded` in treedec/runtimes/embedded.py,
`runtime=vllm` in treedec/runtimes/vllm.py): pages read lazily, unreadable ones kept and
flagged, the work before decoding, the warm-up, records in input order, the phases of the
wall time, each page handed on as it finishes."""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterable, Iterator

from treedec import phases
from treedec.data.synth import Sample
from treedec.engine import pass_log
from treedec.engine.engine import PENDING
from treedec.models.vlm import VLM
from treedec.records import PageRecord, RunResult, page_record, unreadable
from treedec.runtimes.base import Runtime
from treedec.strategies.base import Strategy


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], runtime: Runtime,
                progress: bool = True, warmup: bool = True, cold_drafts: bool = True,
                on_record: Callable[[PageRecord], None] | None = None) -> RunResult:
    """Decode every sample on `runtime`, end to end: drafting and stage 1 (`Runtime.prepare`),
    reading the pages and their prompts (image preprocessing), decoding; `phases` says where
    the wall time went (treedec.phases). Callers holding an engine config write
    `EmbeddedRuntime(cfg).run(vlm, strategy, samples)` (treedec.runtimes.embedded), which
    comes here. `cold_drafts`: drafts from an empty cache, so the drafter's
    cost is in the figures. `warmup` first runs the whole strategy on one page untimed, with
    its own empty draft cache (first calls into torch and the drafter are slow, and a speed
    ratio must not charge that to whichever runs first); its time is `warmup_s`.

    Samples are read lazily: each is read and turned into its prompt only when the engine has
    room, so memory does not grow with the number of pages (a data set that re-reads its
    files on each iteration is iterated again by the warm-up and by HSD's `prepare`; a one-shot
    iterator is peeked, not re-read). `on_record` sees each page as it is finished (unreadable
    ones included), e.g. to write it at once."""
    runtime.check(vlm, strategy)
    warmup_s = 0.0
    if strategy.prepare and iter(samples) is samples:  # `prepare` reads every page before decoding reads
        samples = list(samples)  # them again: a one-shot iterator would reach the engine empty
    first, samples = _first_readable(samples)
    if warmup and first is not None and not phases.nested():
        t = time.perf_counter()
        with phases.cold_drafts(cold_drafts), phases.clock():
            _decode(vlm, strategy, [first], runtime, False)
        warmup_s = time.perf_counter() - t
    passes = runtime.forward_passes  # a running total: this run's are what it adds (a nested run's included)
    with phases.cold_drafts(cold_drafts and not phases.nested()), phases.clock() as (clock, nested), \
            pass_log.recording() as log:  # the engine's passes, nested runs' included (treedec.cost_model)
        records, names, wall, before_s = _decode(vlm, strategy, samples, runtime, progress, clock, on_record)
    given = getattr(strategy.prepare, "cache_dir", None)
    drafts = None if not strategy.prepare else f"folder {given} (may be warm)" if given else \
        "cold (empty cache)" if cold_drafts else "warm (cache as configured)"
    return RunResult(strategy.name, [records[n] for n in names], wall, runtime.forward_passes - passes,
                     runtime.figures(), {} if nested else dict(clock.totals), warmup_s, drafts, runtime.name,
                     runtime.notes(strategy), before_s, None if nested or not log.steps + log.prefills else log)


def _first_readable(samples: Iterable[Sample]) -> tuple[Sample | None, Iterable[Sample]]:
    """The first sample with an image, and the samples to iterate in full: a re-iterable data
    set as it is, a one-shot iterator with what was looked at chained back in front."""
    if iter(samples) is not samples:
        return next((s for s in samples if s.image is not None), None), samples
    seen: list[Sample] = []
    for s in samples:
        seen.append(s)
        if s.image is not None:
            return s, itertools.chain(seen, samples)
    return None, seen


def _decode(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], runtime: Runtime, progress: bool,
            clock: phases.PhaseClock | None = None, on_record: Callable[[PageRecord], None] | None = None
            ) -> tuple[dict[str, PageRecord], list[str], float, float]:
    """Records (by name), names in input order, the wall time of the whole (the clock's
    span: taken before the locals are torn down) and the seconds before the runtime started
    decoding."""
    from tqdm import tqdm

    clock = clock or phases.PhaseClock()
    records: dict[str, PageRecord] = {}
    names: list[str] = []  # input order
    # one phase open from start to end, so that the phases add up to the run's wall time; the
    # clock is exclusive: drafting, reading each page as the engine pulls it and writing are
    # timed as their own phases, not as "decode"
    with clock.phase("decode"):
        total = len(samples) if hasattr(samples, "__len__") else None
        with clock.phase("draft"):  # a run inside (stage 1) is timed as the phase "stage1"
            before, samples = runtime.prepare(vlm, strategy, samples, progress, clock)
        desc = strategy.name if runtime.name == "embedded" else f"{strategy.name} ({runtime.name})"
        bar = tqdm(total=total, desc=desc, unit="page", disable=not progress, smoothing=0.1)

        def done(rec: PageRecord) -> None:
            if rec.name in before:  # work done before decoding (HSD stage 1) is on the page's path
                rec.steps += before[rec.name].get("stage1_steps", 0)
                rec.extra = {**before[rec.name], **rec.extra}
            records[rec.name] = rec
            bar.update(1)
            if on_record:
                with clock.phase("write"):
                    on_record(rec)

        items = readable_items(samples, lambda s: runtime.prompt(vlm, strategy, s), names, done, clock)
        started = time.perf_counter()  # pages are submitted now: what came before, every page waited for
        try:
            results = runtime.decode(vlm, strategy, items)
            if strategy.after_decode:  # work after decoding (crops: the regions read from their crops)
                results = strategy.after_decode(vlm, results, runtime, progress)
            for r in results:
                done(page_record(r, strategy))
        finally:
            bar.close()
    return records, names, clock.span, started - clock.started


def readable_items(samples: Iterable[Sample], prepare, names: list[str], unreadable_done: Callable[[PageRecord], None],
                   clock: phases.PhaseClock | None = None) -> Iterator[tuple[str, Any, Sample]]:
    """Lazily: `(name, prepare(sample), sample)` for each sample with an image; a sample
    without one becomes a flagged empty record passed to `unreadable_done` (kept, never
    dropped). Every name is appended to `names` in input order as it is read. Reading a
    sample and preparing it are timed as `clock`'s phase "load"."""
    clock = clock or phases.PhaseClock()
    it = iter(samples)
    while True:
        with clock.phase("load"):
            s = next(it, _END)
            if s is _END:
                return
            if s is not PENDING:
                names.append(s.name)
                item = None if s.image is None else (s.name, prepare(s), s)
        if s is PENDING:  # the next sample is not ready (drafting beside decoding): the engine steps meanwhile
            yield PENDING
        elif item is None:
            unreadable_done(unreadable(s))
        else:
            yield item


_END = object()
