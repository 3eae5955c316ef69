"""Parse pages with a strategy on a runtime, one run: samples in, a `RunResult` of
`PageRecord`s out (treedec.records). `parse_pages` is the one copy of the per-page bookkeeping
every runtime shares (`treedec.runtimes.base.Runtime`: `runtime=embedded` in
treedec/runtimes/embedded.py, `runtime=vllm` in treedec/runtimes/vllm/runtime.py): pages read lazily,
unreadable ones kept and flagged, the warm-up, records in input order, the phases of the wall
time, each page handed on as it finishes. A strategy's stages around its decode (drafting,
HSD stage 1, crops' reads) are no part of it: `treedec.run.stages.run_strategy` runs each as a
run of its own."""
from __future__ import annotations

import itertools
import time
from collections.abc import Sized
from typing import Any, Callable, Iterable, Iterator

from treedec.data.sample import Sample
from treedec.engine.forward_log import ForwardLog
from treedec.errors import UserError
from treedec.models.vlm import VLM
from treedec.records import PageRecord, RunResult, page_record, unreadable
from treedec.run.phases import PhaseClock
from treedec.runtimes.base import Runtime
from treedec.strategies.base import Strategy


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], runtime: Runtime,
                progress: bool = True, warmup: bool = True, on_record: Callable[[PageRecord], None] | None = None,
                in_flight: int | None = None, unit: str = "page") -> RunResult:
    """Decode every sample on `runtime`: reading the pages and their prompts (image
    preprocessing), decoding; `phases` says where the wall time went (treedec.run.phases). Callers
    holding an engine config write `EmbeddedRuntime(cfg).run(vlm, strategy, samples)`
    (treedec.runtimes.embedded), which comes here. `warmup` first runs the strategy on one page
    untimed (first calls into torch are slow, and a speed ratio must not charge that to
    whichever runs first); its time is `warmup_s`. `unit`: what the progress bar counts (HSD's
    stage 1: crops). `in_flight`: pages decoded at once, instead
    of the runtime's `max_pages` (a stage of many small pages: crops).

    Samples are read lazily: each is read and turned into its prompt only when the engine has
    room, so memory does not grow with the number of pages (a one-shot iterator is peeked by
    the warm-up, not re-read; it may yield None while its next sample is not ready: the
    engine steps the pages it has meanwhile). `on_record` sees each page as it is finished (unreadable ones included), e.g. to
    write it at once."""
    if strategy.before is not None or strategy.after is not None:
        raise UserError(f"strategy {strategy.name!r} has stages of its own around its decode: run it with "
                        "treedec.run.stages.run_strategy (python -m treedec run does)")
    runtime.check(vlm, strategy)
    strategy = strategy.for_run(vlm)  # a draft source of the run's own (one a stage made and fed: as it is)
    warmup_s = 0.0
    if warmup:
        first, samples = _first_readable(samples)
        if first is not None:
            t = time.perf_counter()
            _decode(vlm, strategy, [first], runtime, False)
            warmup_s = time.perf_counter() - t
    passes = runtime.forward_passes  # a running total: this run's are what it adds
    clock = PhaseClock()
    log = ForwardLog()  # the engine's passes (treedec.results.cost_model)
    records, names, wall, before_s = _decode(vlm, strategy, samples, runtime, progress, clock, on_record, in_flight,
                                             unit, log)
    return RunResult(strategy.name, [records[n] for n in names], wall, runtime.forward_passes - passes,
                     attention=runtime.figures(), phases=dict(clock.totals), warmup_s=warmup_s, runtime=runtime.name,
                     notes=runtime.notes(strategy), before_s=before_s, forwards=log if log.steps + log.prefills else None)


def _first_readable(samples: Iterable[Sample | None]) -> tuple[Sample | None, Iterable[Sample | None]]:
    """The first sample with an image, and the samples to iterate in full: a re-iterable data
    set as it is, a one-shot iterator with what was looked at chained back in front."""
    if iter(samples) is not samples:
        return next((s for s in samples if s.image is not None), None), samples
    seen: list[Sample] = []
    for s in samples:
        seen.append(s)
        if s is not None and s.image is not None:
            return s, itertools.chain(seen, samples)
    return None, seen


def _decode(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], runtime: Runtime, progress: bool,
            clock: PhaseClock | None = None, on_record: Callable[[PageRecord], None] | None = None,
            in_flight: int | None = None, unit: str = "page", log: ForwardLog | None = None
            ) -> tuple[dict[str, PageRecord], list[str], float, float]:
    """Records (by name), names in input order, the wall time of the whole (the clock's
    span: taken before the locals are torn down) and the seconds before the runtime started
    decoding."""
    from tqdm import tqdm

    clock = clock or PhaseClock()
    records: dict[str, PageRecord] = {}
    names: list[str] = []  # input order
    # one phase open from start to end, so that the phases add up to the run's wall time; the
    # clock is exclusive: handing drafts to the runtime, reading each page as the engine pulls it
    # and writing are timed as their own phases, not as "decode"
    with clock.phase("decode"):
        total = len(samples) if isinstance(samples, Sized) else None
        with clock.phase("draft"):  # vLLM: the drafts known ahead written to its proposer's store
            samples = runtime.prepare(vlm, strategy, samples)
        desc = strategy.name if runtime.name == "embedded" else f"{strategy.name} ({runtime.name})"
        bar = tqdm(total=total, desc=desc, unit=unit, disable=not progress, smoothing=0.1)

        def done(rec: PageRecord) -> None:
            records[rec.name] = rec
            bar.update(1)
            if on_record:
                with clock.phase("write"):
                    on_record(rec)

        items = readable_items(samples, lambda s: runtime.prompt(vlm, strategy, s), names, done, clock)
        started = time.perf_counter()  # pages are submitted now: what came before, every page waited for
        try:
            for r in runtime.decode(vlm, strategy, items, in_flight, log):
                done(page_record(r, strategy))
        finally:
            bar.close()
    return records, names, clock.span, started - clock.started


def readable_items(samples: Iterable[Sample | None], prepare, names: list[str],
                   unreadable_done: Callable[[PageRecord], None], clock: PhaseClock | None = None
                   ) -> Iterator[tuple[str, Any, Sample] | None]:
    """Lazily: `(name, prepare(sample), sample)` for each sample with an image; a sample
    without one becomes a flagged empty record passed to `unreadable_done` (kept, never
    dropped); None where the next sample is not ready (passed on to the engine). Every name is appended to `names` in input order as it is read. Reading a
    sample and preparing it are timed as `clock`'s phase "load"."""
    clock = clock or PhaseClock()
    it = iter(samples)
    while True:
        with clock.phase("load"):
            s = next(it, _END)
            if s is _END:
                return
            if s is not None:
                names.append(s.name)
                item = None if s.image is None else (s.name, prepare(s), s)
        if s is None:  # the next sample is not ready (drafting beside decoding): the engine steps meanwhile
            yield None
        elif item is None:
            unreadable_done(unreadable(s))
        else:
            yield item


_END = object()
