"""Stages after decoding (`crops`, `Strategy.after`): the pages decoded (the layout pass, one
`runtime.run`), then every region of every page read from its crop (one `runtime.run`, the
crops of a page in flight together: `in_flight.crops_in_flight`), the
readings spliced into the pages. A page's latency runs to its last crop's reading; its pages
are handed on (`on_record`) once read."""
from __future__ import annotations

import time
from typing import Callable

from treedec.phases import PhaseClock
from treedec.records import PageRecord, RunResult, page_record
from treedec.runtimes.base import Runtime
from treedec.stages.in_flight import crops_in_flight
from treedec.stages.merge import MAIN, merged
from treedec.strategies.base import Strategy
from treedec.strategies.stages import AfterDecoding


def read_after(runtime: Runtime, vlm, after: AfterDecoding, strategy: Strategy, samples, progress: bool,
               on_record: Callable[[PageRecord], None] | None) -> RunResult:
    clock = PhaseClock()
    with clock.phase("decode"):
        t_pages = time.perf_counter()
        with clock.phase(MAIN):
            main = runtime.run(vlm, strategy, samples, progress=progress, warmup=False)
        jobs = [(rec, at, crop) for rec in main.records if rec.decoding is not None
                for at, crop in after.regions(vlm, rec.decoding.graph, rec.decoding.sample)]
        per_page = max((sum(1 for j in jobs if j[0] is rec) for rec in main.records), default=1)
        t_read = time.perf_counter()
        reads = runtime.run(vlm, after.reader, [c for _, _, c in jobs], progress=False, warmup=False,
                            in_flight=crops_in_flight(runtime, per_page))
        read = {r.name: r.decoding for r in reads.records}
        records = []
        for rec in main.records:
            r = rec.decoding
            if r is not None:
                crops = [(at, read[c.name]) for p, at, c in jobs if p is rec]
                decoded_at = t_pages + main.before_s + r.queue_s + r.latency_s
                read_at = max((t_read + reads.before_s + c.queue_s + c.latency_s for _, c in crops), default=decoded_at)
                after.splice(r, crops)
                r.latency_s += max(0.0, read_at - decoded_at)  # waiting for the read stage too
                rec = page_record(r, strategy)
            records.append(rec)
            if on_record:
                with clock.phase("write"):
                    on_record(rec)
    main.records = records
    return merged(main, clock, [reads], 0.0)
