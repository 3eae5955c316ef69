"""Stages before decoding (HSD, `Strategy.before`): every page drafted (no model), stage 1 on
the drafted regions' crops (one `runtime.run`), each page's drafts handed to the strategy's
draft source, then the pages decoded (one `runtime.run`).

Drafting beside the model's runs (`strategy.draft_workers > 0`, on a runtime that steps its
pages while the next is not ready: `Runtime.pending_inputs`): the first run (stage 1's crops,
or the page decode without stage 1) takes each page as it is drafted; the seconds it waited
for drafts are the run's phase "draft". Otherwise every page is drafted first (phase "draft").
Per page, its stage-1 figures (`stage1_steps`: its longest crop's steps, on its critical path
before its own) are added to its record before it is handed on."""
from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from typing import Iterable, Iterator

from treedec.records import PageRecord, RunResult
from treedec.run.phases import PhaseClock
from treedec.run.stages.in_flight import crops_in_flight
from treedec.run.stages.merge import MAIN, merged, moved
from treedec.runtimes.base import Runtime
from treedec.strategies.base import Strategy
from treedec.strategies.stages import BeforeDecoding, Drafted


class Waited:
    """An iterator's items, and the seconds spent getting them (drafting, waiting for a draft)."""

    def __init__(self, items: Iterable):
        self.items, self.seconds = iter(items), 0.0

    def __iter__(self) -> Iterator:
        while True:
            t = time.perf_counter()
            item = next(self.items, _END)
            self.seconds += time.perf_counter() - t
            if item is _END:
                return
            yield item


_END = object()


def decode_drafted(runtime: Runtime, vlm, before: BeforeDecoding, strategy: Strategy, samples, progress: bool,
                   cold: bool, on_record) -> RunResult:
    strategy = strategy.for_run(vlm)  # its source the run's own: the stages hand it the pages' drafts
    given = before.cache_dir
    drafts = f"folder {given} (may be warm)" if given else "cold (empty cache)" if cold else "warm (cache as configured)"
    folder = tempfile.TemporaryDirectory(prefix="treedec-drafts-") if cold and not given else nullcontext(given)
    with folder as cache:
        clock, figures = PhaseClock(), {}
        beside = before.beside and runtime.pending_inputs
        with clock.phase("decode"):
            todo, stages, drafted = _before(runtime, vlm, before, strategy, samples, cache, beside, progress, clock,
                                            figures)
            start = time.perf_counter()
            with clock.phase(MAIN):
                main = runtime.run(vlm, strategy, todo, progress=progress, warmup=False,
                                   on_record=_with(figures, on_record))
            if beside and not stages:  # the pages waited for their drafts inside the run, as it read them
                moved(main.phases, drafted.seconds, "load", "draft")
        for rec in main.records:
            _add(figures, rec)
        return merged(main, clock, stages, start - clock.started, drafts)


def drafts_ahead(runtime: Runtime, vlm, strategy: Strategy, samples, progress: bool = False
                 ) -> tuple[Strategy, dict[str, dict]]:
    """`strategy` made for a run on `vlm` (`Strategy.for_run`) with the stages before its decoding
    run on `runtime` (every page drafted first, from the configured draft cache; stage 1's crops
    read) and its run's source handed every page's drafts, so that it decodes the pages elsewhere
    (an engine of one's own, with logits processors: the lossless tests); and the per-page
    figures. A strategy without stages before decoding is only made for the run."""
    run = strategy.for_run(vlm)
    figures: dict[str, dict] = {}
    if run.before is not None:
        _before(runtime, vlm, run.before, run, samples, run.before.cache_dir, False, progress, PhaseClock(), figures)
    return run, figures


def _before(runtime: Runtime, vlm, before: BeforeDecoding, strategy: Strategy, samples, cache, beside: bool,
            progress: bool, clock: PhaseClock, figures: dict) -> tuple[Iterable, list[RunResult], "Waited"]:
    """Drafting and stage 1 of `strategy` (made for the run: its source is handed the pages'
    drafts): (the samples for the page decode, the stage runs made, the drafting iterator).
    Beside decoding without stage 1, the samples come as they are drafted."""
    drafted = Waited(before.drafted(vlm, samples, cache, beside, progress))
    stage1 = before.stage1(vlm)
    if stage1 is not None:
        return samples, [_stage1(runtime, vlm, before, strategy, stage1, drafted, figures, beside, progress, clock)], \
            drafted
    todo = _pages(vlm, before, strategy, drafted, figures)
    if not beside:
        with clock.phase("draft"):
            todo = list(todo)
    return todo, [], drafted


def _pages(vlm, before: BeforeDecoding, strategy: Strategy, drafted: Iterable, figures: dict) -> Iterator:
    """The samples as drafted, each page's drafts handed to the run's draft source first."""
    for d in drafted:
        if d is None:  # the next page is not drafted yet
            yield None
            continue
        figures[d.sample.name] = before.use(vlm, d, [], strategy.drafter)
        yield d.sample


def _stage1(runtime: Runtime, vlm, before: BeforeDecoding, strategy: Strategy, stage1, drafted: Waited,
            figures: dict, beside: bool, progress: bool, clock: PhaseClock) -> RunResult:
    """Stage 1: the crops of every drafted page read in one run (its reader made for it, each
    crop's drafts handed to the reader's source; a page's crops in flight together:
    `in_flight.crops_in_flight`); each page's drafts, refined by its crops' readings, handed to
    `strategy`'s source."""
    held: list[tuple[Drafted, list[str]]] = []  # (drafted page, its crops' names)
    reader = stage1.strategy.for_run(vlm)

    def crops() -> Iterator:
        for d in drafted:
            if d is None:  # the next page is not drafted yet
                yield None
                continue
            cs = stage1.crops(vlm, d)
            held.append((d, [c.name for c, _ in cs]))
            for crop, drafts in cs:
                reader.drafter.use(crop.name, drafts)
                yield crop

    items = crops()
    if not beside:
        with clock.phase("draft"):
            items = list(items)
    per_page = None if beside else max((len(names) for _, names in held), default=1)
    with clock.phase("stage1"):
        res = runtime.run(vlm, reader, items, progress=progress, warmup=False, unit="crop",
                          in_flight=crops_in_flight(runtime, per_page))
        read = {r.name: r for r in res.records}
        for d, names in held:
            figures[d.sample.name] = before.use(vlm, d, [read[n] for n in names], strategy.drafter)
    if beside:  # the crops' run waited for the pages' drafts as it read them
        moved(clock.totals, drafted.seconds, "stage1", "draft")
    return res


def _add(figures: dict, rec: PageRecord) -> PageRecord:
    """A page's stage figures into its record, once: its stage-1 steps on its critical path."""
    f = figures.pop(rec.name, None)
    if f is not None:
        if rec.decoding is not None:  # a page not decoded was not read in stage 1 either
            rec.decoding.steps += f.get("stage1_steps", 0)
        rec.stage_figures = {**f, **rec.stage_figures}
    return rec


def _with(figures: dict, on_record):
    return None if on_record is None else lambda rec: on_record(_add(figures, rec))
