"""Drafting beside decoding: pipeline-OCR drafts made in worker processes, handed back in
input order, at most `ahead` pages drafted and not yet taken (back-pressure: the reader
is advanced only when a page is taken).

`DraftQueue` reads samples lazily, serves a page from the draft cache when it is there,
and sends the others to a pool of `workers` processes (0: drafts in this process, when the
page is taken). A draft crosses the process boundary as its OmniDocBench dict and is read
back through the cache's own path (`cache.lookup` / `cache.store`, as `cache.draft_pages`
does), so it is the same object, byte for byte, as one drafted in process. Each page's drafting cost comes with it: the worker's
CPU seconds and wall seconds (`DraftCost`).

Worker pools are kept per (workers, drafter config) for the life of the process (models
load once per worker, in the run's untimed warm-up), and shut down at exit.
"""
from __future__ import annotations

import atexit
import multiprocessing
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from treedec.ocr.cache import default_cache_dir, draft_image_path, lookup, store


@dataclass
class DraftCost:
    cpu_s: float = 0.0  # CPU seconds of the process that drafted (a worker's, or this one's)
    wall_s: float = 0.0  # wall seconds drafting took where it ran
    cached: bool = False  # served from the draft cache (no drafting)


# ------------------------------------------------------------------ worker side
_drafter = None


def _init_worker(config) -> None:
    global _drafter
    from treedec.ocr.pipeline import PipelineOCR

    _drafter = PipelineOCR.shared(config)


def draft_one(drafter, image, image_path: str) -> tuple[dict[str, Any], DraftCost]:
    """One page's draft as its OmniDocBench dict, and what drafting it cost this process."""
    from treedec.io.omnidocbench import page_to_omnidocbench

    c, t = time.process_time(), time.perf_counter()
    data = page_to_omnidocbench(drafter.draft(image, image_path))
    return data, DraftCost(time.process_time() - c, time.perf_counter() - t)


def _work(image, image_path: str) -> tuple[dict[str, Any], DraftCost]:
    return draft_one(_drafter, image, image_path)


def _warm(_: int) -> bool:
    _drafter._load()
    return True


# ------------------------------------------------------------------ pools
_pools: dict[tuple[int, str], ProcessPoolExecutor] = {}


def worker_pool(workers: int, config) -> ProcessPoolExecutor:
    """A pool of `workers` drafting processes for `config` (started once per process, models
    loaded in every worker before it is returned)."""
    key = (workers, config.tag())
    if key not in _pools:
        # spawn: the workers import the drafter only (no torch, no copy of this process's threads)
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker, initargs=(config,))
        list(pool.map(_warm, range(workers)))  # each task warms one idle worker
        _pools[key] = pool
    return _pools[key]


@atexit.register
def _shutdown() -> None:
    for pool in _pools.values():
        pool.shutdown(wait=False, cancel_futures=True)
    _pools.clear()


# ------------------------------------------------------------------ the queue
class DraftQueue:
    """Drafts of `samples` in input order: `take()` gives `(sample, page, cost)`, `page` None
    for a sample without an image (the run loop flags it), or the engine's `PENDING` when
    the next page is still being drafted and `wait` ran out."""

    def __init__(self, samples: Iterable, workers: int = 0, ahead: int = 8, cache_dir: str | Path | None = None,
                 config=None):
        from treedec.ocr.pipeline import PipelineConfig

        if workers < 0 or ahead < 1:
            raise ValueError(f"workers must be >= 0 and ahead >= 1, got {workers}, {ahead}")
        self.config = config or PipelineConfig()
        self.tag = self.config.tag()
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.workers, self.ahead = workers, ahead
        self._samples = iter(samples)
        self._pool = worker_pool(workers, self.config) if workers else None
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
                self._queue.append((sample, path, self._pool.submit(_work, sample.image, draft_image_path(sample))))
            else:
                self._queue.append((sample, path, None))  # drafted here, when taken

    def __len__(self) -> int:
        """Pages read and not yet taken."""
        return len(self._queue)

    def ready(self) -> bool:
        """The next page can be taken without waiting (in-process drafting counts as ready)."""
        if not self._queue:
            return False
        _, _, job = self._queue[0]
        return not isinstance(job, Future) or job.done()

    def take(self, wait: float | None = None):
        """The next `(sample, page, cost)`; None at the end; `PENDING` when `wait` seconds passed
        and its draft is not done (None: wait as long as it takes)."""
        from treedec.engine.engine import PENDING

        if not self._queue:
            return None
        sample, path, job = self._queue[0]
        if isinstance(job, Future):
            try:
                data, cost = job.result(timeout=wait)
            except TimeoutError:
                return PENDING
            page = store(path, data, sample)
        elif job is None and path is not None:  # workers=0
            from treedec.ocr.pipeline import PipelineOCR

            data, cost = draft_one(PipelineOCR.shared(self.config), sample.image, draft_image_path(sample))
            page = store(path, data, sample)
        else:
            page, cost = job if job is not None else (None, DraftCost())
        self._queue.popleft()
        self._fill()
        return sample, page, cost

    def __iter__(self) -> Iterator[tuple[Any, Any, DraftCost]]:
        while (item := self.take()) is not None:
            yield item
