"""What the actors of a Ray run did, kept by one actor of its own (`Ledger`): per pool
(read, draft, decode), the actors started (a replaced one starts again: its constructor runs
anew), the pages begun (a page begun twice was redone), and the seconds each pool was busy. From it the
summary's `pages_redone` and which pool bounded the run (`actors_replaced` is Ray's own count of
the restarts it made: `treedec.cluster.executor`)."""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from typing import Any

POOLS = ("read", "draft", "decode")


class Ledger:
    """Plain counts; made a Ray actor by `treedec.cluster.executor` (one per run), called by
    every reader, drafter and decoder."""

    def __init__(self):
        self.starts: Counter = Counter()
        self.begun: dict[str, Counter] = defaultdict(Counter)
        self.busy: dict[str, float] = defaultdict(float)

    def started(self, pool: str) -> None:
        self.starts[pool] += 1

    def began(self, pool: str, names: list[str]) -> None:
        self.begun[pool].update(names)

    def finished(self, pool: str, busy_s: float) -> None:
        self.busy[pool] += busy_s

    def figures(self, pools: dict[str, int], wall_s: float) -> dict[str, Any]:
        """`pools`: actors per pool (decode, draft). `busy_s`: each pool's seconds of work
        summed over its actors; `utilisation`: that over (actors x wall), the bound the pool
        whose actors were busiest."""
        redone = sum(c - 1 for s in POOLS for c in self.begun[s].values() if c > 1)
        busy = {s: round(self.busy[s], 3) for s in POOLS if s in self.busy}
        use = {s: round(self.busy[s] / (n * wall_s), 3) for s, n in pools.items() if n and wall_s > 0 and s in self.busy}
        return {"pages_redone": redone, "actors_started": dict(self.starts),
                "busy_s": busy, "utilisation": use, "bound_by": max(use, key=use.get) if use else None}


def register(ledger, pool: str) -> None:
    """An actor of `pool` says it started (again, when it replaces one that died)."""
    import ray

    ray.get(ledger.started.remote(pool))


@contextmanager
def working(ledger, pool: str, names: list[str]):
    """The pages `names` begun by `pool` now, finished (its busy seconds counted) at the end."""
    import ray

    ray.get(ledger.began.remote(pool, names))
    t = time.perf_counter()
    yield
    ray.get(ledger.finished.remote(pool, time.perf_counter() - t))
