"""Where a run's wall time goes: load, draft, stage 1, decode, write.

`PhaseClock` times phases exclusively: entering a phase pauses the one around it, so the
phases add up to the time spent inside them; its `span` is the wall time from entering its
first outermost phase to leaving its last one, read from the same clock readings (so a run's
wall time has no gap, however small, that its phases could miss). Every run has a clock of
its own (`treedec.run.parse_pages`); a strategy with stages has one more, around its stages'
runs, and their phases merged into it (`treedec.run.stages`): no clock is shared or global.
"""
from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

PHASES = ("load", "draft", "stage1", "decode", "write")


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
