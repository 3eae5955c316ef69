"""Where a drafter's CPU goes: this process's CPU seconds per drafting stage. A stage timed
inside another counts for the inner one only (re-reading inside the fixed-pitch repairs is
`fixed_pitch`, not `recognition`), so the stages add up to the time they cover."""
from __future__ import annotations

import contextlib
import functools
import time
from typing import Callable, Iterator

STAGES = ("load", "layout", "detection", "orientation", "recognition", "fixed_pitch", "tables", "formulas",
          "reading_order", "rules")


class StageClock:
    """`with clock("layout"): ...` adds the block's CPU seconds (`time.process_time`) to
    `seconds["layout"]`, less what stages nested in it took."""

    def __init__(self):
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._inner: list[float] = []  # per open stage: CPU seconds its nested stages took

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        if stage not in self.seconds:
            raise ValueError(f"unknown drafting stage {stage!r}; stages: {', '.join(STAGES)}")
        start = time.process_time()
        self._inner.append(0.0)
        try:
            yield
        finally:
            took = time.process_time() - start
            inner = self._inner.pop()
            self.seconds[stage] += took - inner
            if self._inner:
                self._inner[-1] += took

    def timed(self, stage: str, fn: Callable) -> Callable:
        """`fn`, each call timed as `stage`."""
        @functools.wraps(fn)
        def call(*args, **kwargs):
            with self(stage):
                return fn(*args, **kwargs)

        return call

    def reset(self) -> dict[str, float]:
        """The seconds so far (then zero)."""
        got, self.seconds = self.seconds, dict.fromkeys(STAGES, 0.0)
        return got
