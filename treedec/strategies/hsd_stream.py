"""HSD's drafting beside the model's runs (`strategy.draft_workers > 0`): pages flow from the
reader to a pool of drafting processes (`treedec.ocr.pool.DraftQueue`, a bounded number
ahead) and on, as each is drafted, to the run that takes them first (stage 1's crops, or the
page decode without stage 1), whose continuous batching steps the pages it has while the
next draft is not done (an item None). The pages decoded are those of drafting
first, draft for draft; only the order of work changes. Each page's figures add what
drafting it cost where it ran (`draft_cpu_s`, `draft_wall_s`: a worker's CPU and wall
seconds; 0 for a cached draft)."""
from __future__ import annotations

import time
from typing import Iterable, Iterator

from treedec.ocr.pool import DraftQueue

IDLE_ASK_S = 1e-3  # asked again sooner than this after a None: the engine had nothing to step
IDLE_WAIT_S = 0.05  # ... then wait up to this long for the draft (the engine is idle anyway)


def drafted_beside(samples: Iterable, workers: int, ahead: int, cache_dir, ocr, drafters=None) -> Iterator:
    """`(sample, draft page or None, DraftCost)` in input order, None while the next
    draft is not done (waiting a little when asked again at once: the run had nothing to step).
    `drafters`: the owner of the worker pool (`treedec.ocr.drafters.Drafters`)."""
    queue = DraftQueue(samples, workers, ahead, cache_dir, ocr, drafters)
    idle = False
    while queue:  # pages left to take
        got = queue.take(IDLE_WAIT_S if idle else 0.0)
        if got is None:  # not drafted within the wait
            asked = time.perf_counter()
            yield None
            idle = time.perf_counter() - asked < IDLE_ASK_S
            continue
        idle = False
        yield got
