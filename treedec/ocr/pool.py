"""Drafting beside decoding: pipeline-OCR drafts made in worker processes, handed back in
input order, at most `ahead` pages drafted and not yet taken (back-pressure: the reader
is advanced only when a page is taken).

`DraftQueue` reads samples lazily, serves a page from the draft cache when it is there,
and sends the others to a pool of `workers` processes (0: drafts in this process, when the
page is taken). A draft crosses the process boundary as its OmniDocBench dict and is read
back through the cache's own path (`cache.lookup` / `cache.store`, as `cache.draft_pages`
does), so it is the same object, byte for byte, as one drafted in process. Each page's drafting cost comes with it: the worker's
CPU seconds and wall seconds (`DraftCost`).

The drafter and the pools are an owner's (`treedec.ocr.drafters.Drafters`; HSD's
`TwoStages` holds one for its runs): started once, models loaded once per worker, in the
run's untimed warm-up.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Iterable, Iterator

from treedec.ocr.cache import default_cache_dir, draft_image_path, lookup, store
from treedec.ocr.drafters import DraftCost, Drafters, draft_one, run_in_pool

__all__ = ["DraftCost", "DraftQueue", "Drafters"]


class DraftQueue:
    """Drafts of `samples` in input order: `take()` gives `(sample, page, cost)`, `page` None
    for a sample without an image (the run loop flags it), or None when the next page is
    still being drafted and `wait` ran out (`len(queue)`: the pages left to take).
    `drafters`: whose drafter and pools draft (None: a fresh owner, this queue's alone)."""

    def __init__(self, samples: Iterable, workers: int = 0, ahead: int = 8, cache_dir: str | Path | None = None,
                 config=None, drafters: Drafters | None = None):
        from treedec.ocr.pipeline import PipelineConfig

        if workers < 0 or ahead < 1:
            raise ValueError(f"workers must be >= 0 and ahead >= 1, got {workers}, {ahead}")
        self.config = config or PipelineConfig()
        self.tag = self.config.tag()
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.workers, self.ahead = workers, ahead
        self._samples = iter(samples)
        self.drafters = drafters if drafters is not None else Drafters()
        self._pool = self.drafters.pool(workers, self.config) if workers else None
        self._queue: deque[tuple[Any, Path | None, Future | tuple | None]] = deque()
        self._ended = False
        self._fill()

    def _fill(self) -> None:
        while not self._ended and len(self._queue) < self.ahead:
            sample = next(self._samples, None)
            if sample is None:
                self._ended = True
                return
            if sample.image is None:
                self._queue.append((sample, None, None))
                continue
            path, page = lookup(self.cache_dir, sample, self.tag)
            if page is not None:
                self._queue.append((sample, path, (page, DraftCost(cached=True))))
            elif self._pool is not None:
                self._queue.append((sample, path, run_in_pool(self._pool, sample.image, draft_image_path(sample))))
            else:
                self._queue.append((sample, path, None))  # drafted here, when taken

    def __len__(self) -> int:
        """Pages read and not yet taken (0: none left, the samples all read and taken)."""
        return len(self._queue)

    def ready(self) -> bool:
        """The next page can be taken without waiting (in-process drafting counts as ready)."""
        if not self._queue:
            return False
        _, _, job = self._queue[0]
        return not isinstance(job, Future) or job.done()

    def take(self, wait: float | None = None):
        """The next `(sample, page, cost)`; None when `wait` seconds passed and its draft is not
        done (`wait` None: as long as it takes), or when none is left (`len`)."""
        if not self._queue:
            return None
        sample, path, job = self._queue[0]
        if isinstance(job, Future):
            try:
                data, cost = job.result(timeout=wait)
            except TimeoutError:
                return None
            page = store(path, data, sample)
        elif job is None and path is not None:  # workers=0
            data, cost = draft_one(self.drafters.here(self.config), sample.image, draft_image_path(sample))
            page = store(path, data, sample)
        else:
            page, cost = job if job is not None else (None, DraftCost())
        self._queue.popleft()
        self._fill()
        return sample, page, cost

    def __iter__(self) -> Iterator[tuple[Any, Any, DraftCost]]:
        while self._queue:
            yield self.take()
