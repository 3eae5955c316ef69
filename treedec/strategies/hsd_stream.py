"""HSD's drafting beside decoding (`strategy.draft_workers > 0`): pages flow from the reader
to a pool of drafting processes (`treedec.ocr.pool.DraftQueue`, a bounded number ahead)
and on to the engine's continuous batching, so a run's wall time tends to the larger of
drafting and decoding rather than their sum.

The embedded runtime (`treedec.runtimes.embedded`) asks the strategy's `prepare.stream` for
the samples to decode instead of calling `prepare` first. Each drafted page gets its stage 1 (its crops decoded, together
with the crops of every other page whose draft is ready) just before it is handed to the
engine; while the next draft is not done, the stream yields the engine's `PENDING` and the
engine steps the pages it has. The pages decoded are the prelude's (`TwoStages.__call__`)
draft for draft; only the order of work changes.

Time: waiting for a draft is the run's phase "draft", stage 1 its phase "stage1" (the
nested run's clock); each page's figures add what drafting it cost where it ran
(`draft_cpu_s`, `draft_wall_s`: a worker's CPU and wall seconds; 0 for a cached draft).
"""
from __future__ import annotations

import time
from typing import Iterator

from treedec.engine.engine import PENDING
from treedec.ocr.pool import DraftQueue

IDLE_ASK_S = 1e-3  # asked again sooner than this after a PENDING: the engine had nothing to step
IDLE_WAIT_S = 0.05  # ... then wait up to this long for the draft (the engine is idle anyway)


class DraftStream:
    def __init__(self, stages, workers: int, ahead: int):
        self.stages, self.workers, self.ahead = stages, workers, ahead

    def __call__(self, vlm, samples, runtime, figures: dict[str, dict], clock) -> Iterator:
        """The samples in input order, each once its draft and stage 1 (its crops decoded on
        `runtime`, the Runtime that runs the pages) are done (`figures` filled as they are),
        with `PENDING` between them while a draft is not."""
        st, drafter = self.stages, self.stages.drafter
        drafter.pages, drafter._seqs, drafter.grids = {}, {}, {}
        with clock.phase("draft"):
            queue = DraftQueue(samples, self.workers, self.ahead, st.cache_dir, st.ocr)
        idle = False
        while True:
            with clock.phase("draft"):
                got = queue.take(IDLE_WAIT_S if idle else 0.0)
                batch = [] if got is None or got is PENDING else [got]
                while batch and len(batch) < runtime.cfg.max_pages and queue.ready():
                    batch.append(queue.take())  # every draft already done: their crops in one stage-1 run
            if got is None:
                return
            if got is PENDING:
                asked = time.perf_counter()
                yield PENDING
                idle = time.perf_counter() - asked < IDLE_ASK_S
                continue
            idle = False
            st.take(vlm, batch, runtime, figures)
            for s, _, _ in batch:
                yield s
