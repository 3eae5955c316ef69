"""Stages after decoding (`crops`, `Strategy.after`): the pages decoded (the layout pass, one
`runtime.run`; in a format whose layout is a detector's, no run: `AfterDecoding.prepare` gave
it), then every region of every page read from its crop (one `runtime.run`, the crops of a page
in flight together: `in_flight.crops_in_flight`), each page made of its readings
(`AfterDecoding.record`). Drafts (hsd in a two-stage format) are handed to the layout pass's and
the crops' draft sources before their runs. A page's latency runs to its last crop's reading;
its pages are handed on (`on_record`) once read."""
from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from typing import Callable

from treedec.records import PageRecord, RunResult
from treedec.run.phases import PhaseClock
from treedec.run.stages.in_flight import crops_in_flight
from treedec.run.stages.merge import MAIN, merged
from treedec.runtimes.base import Runtime
from treedec.strategies.base import Strategy
from treedec.strategies.stages import AfterDecoding


def read_after(runtime: Runtime, vlm, after: AfterDecoding, strategy: Strategy, samples, progress: bool,
               on_record: Callable[[PageRecord], None] | None, cold: bool = True) -> RunResult:
    folder = tempfile.TemporaryDirectory(prefix="treedec-drafts-") if cold and not after.cache_dir \
        else nullcontext(after.cache_dir)
    clock = PhaseClock()
    with folder as cache, clock.phase("decode"):
        t_pages = time.perf_counter()
        with clock.phase("draft"):
            known = after.prepare(vlm, samples, cache, progress)
        run = _drafted(strategy.for_run(vlm), [(s.name, after.layout_drafts(known, s)) for s in samples])
        with clock.phase(MAIN):
            main = runtime.run(vlm, run, samples, progress=progress, warmup=False) if after.decodes_pages \
                else after.detected(strategy, samples)
        jobs = [(rec, at, crop, drafts) for rec in main.records if rec.decoding is not None
                for at, crop, drafts in after.regions(vlm, rec.decoding, known)]
        per_page = max((sum(1 for j in jobs if j[0] is rec) for rec in main.records), default=1)
        reader = _drafted(after.reader(vlm).for_run(vlm), [(c.name, d) for _, _, c, d in jobs])
        t_read = time.perf_counter()
        reads = runtime.run(vlm, reader, [c for _, _, c, _ in jobs], progress=False, warmup=False,
                            in_flight=crops_in_flight(runtime, per_page))
        if not after.decodes_pages:  # the crops' run is the only model run
            main.attention, main.runtime = reads.attention, reads.runtime
        read = {r.name: r.decoding for r in reads.records}
        records = []
        for rec in main.records:
            r = rec.decoding
            if r is not None:
                crops = [(at, read[c.name]) for p, at, c, _ in jobs if p is rec]
                decoded_at = t_pages + main.before_s + r.queue_s + r.latency_s
                read_at = max((t_read + reads.before_s + c.queue_s + c.latency_s for _, c in crops), default=decoded_at)
                rec = after.record(r, crops, strategy, known)
                r.latency_s += max(0.0, read_at - decoded_at)  # waiting for the read stage too
            records.append(rec)
            if on_record:
                with clock.phase("write"):
                    on_record(rec)
    main.records = records
    return merged(main, clock, [reads], 0.0)


def _drafted(strategy: Strategy, drafts: list[tuple[str, list[list[int]]]]) -> Strategy:
    """`strategy` (made for the run) with each named sample's drafts handed to its draft source."""
    for name, seqs in drafts:
        if seqs and strategy.drafter is not None:
            strategy.drafter.use(name, seqs)
    return strategy
