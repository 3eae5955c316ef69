"""Where a run's wall time goes: load, draft, stage 1, decode, write.

`PhaseClock` times phases exclusively: entering a phase pauses the one around it, so the
phases add up to the time spent inside them; its `span` is the wall time from entering its
first outermost phase to leaving its last one, read from the same clock readings (so a run's
wall time has no gap, however small, that its phases could miss). A run opens one clock (`clock()`); a run
started inside another (HSD's stage 1 decodes the drafted crops through the same run loop,
`treedec.parse_pages`, while the page run's `draft` phase is open) records into the outer
clock under its own phase instead, so drafting and stage 1 come apart without the strategy knowing.

`cold_drafts()` points the draft cache (`TREEDEC_DRAFT_CACHE`, read by
treedec.drafters' cache at call time) at an empty folder for the time of a run, so every
strategy and every concurrency level pays its own drafting.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

PHASES = ("load", "draft", "stage1", "decode", "write")
DRAFT_CACHE_ENV = "TREEDEC_DRAFT_CACHE"  # the drafters' cache folder (treedec.drafters' cache module)

_active: list["PhaseClock"] = []


class PhaseClock:
    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[str] = []
        self._t = 0.0
        self.started: float | None = None  # perf_counter when the first outermost phase was entered
        self.ended: float | None = None  # ... and when the last one was left

    @property
    def span(self) -> float:
        """Wall seconds from entering the first outermost phase to leaving the last one."""
        if self.started is None or self.ended is None:
            return 0.0
        return self.ended - self.started

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.perf_counter()
        if self._stack:
            self.totals[self._stack[-1]] += now - self._t
        elif self.started is None:
            self.started = now
        self._stack.append(name)
        self._t = now
        try:
            yield
        finally:
            now = time.perf_counter()
            self.totals[self._stack.pop()] += now - self._t
            self._t = now
            if not self._stack:
                self.ended = now


def nested() -> bool:
    """Inside a run's clock (a run started by another run)."""
    return bool(_active)


@contextmanager
def clock(nested_phase: str = "stage1") -> Iterator[tuple[PhaseClock, bool]]:
    """A run's clock: a fresh one, or, inside another run, a throwaway one while the outer
    clock records everything under `nested_phase`. Yields (clock, nested)."""
    if _active:
        with _active[-1].phase(nested_phase):
            yield PhaseClock(), True
        return
    c = PhaseClock()
    _active.append(c)
    try:
        yield c, False
    finally:
        _active.pop()


@contextmanager
def cold_drafts(enabled: bool = True) -> Iterator[str | None]:
    """Within: the draft cache is a new empty folder (removed after); yields it (None when
    not enabled, the cache then is whatever `TREEDEC_DRAFT_CACHE` says)."""
    if not enabled:
        yield None
        return
    before = os.environ.get(DRAFT_CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="treedec-drafts-") as d:
        os.environ[DRAFT_CACHE_ENV] = d
        try:
            yield d
        finally:
            if before is None:
                os.environ.pop(DRAFT_CACHE_ENV, None)
            else:
                os.environ[DRAFT_CACHE_ENV] = before
