"""Who owns the pipeline drafters: `Drafters` holds one in-process drafter per config and one
pool of drafting processes per (workers, config), each made once and kept (models load once)
until it is closed or collected. A drafting worker keeps its drafter on its own process
object (`multiprocessing.current_process()`): no module holds drafters or pools."""
from __future__ import annotations

import multiprocessing
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any


@dataclass
class DraftCost:
    cpu_s: float = 0.0  # CPU seconds of the process that drafted (a worker's, or this one's)
    wall_s: float = 0.0  # wall seconds drafting took where it ran
    cached: bool = False  # served from the draft cache (no drafting)


def _init_worker(config) -> None:
    from treedec.ocr.pipeline import PipelineOCR

    multiprocessing.current_process().drafter = PipelineOCR(config)  # this worker's own, for its life


def draft_one(drafter, image, image_path: str) -> tuple[dict[str, Any], DraftCost]:
    """One page's draft as its OmniDocBench dict, and what drafting it cost this process."""
    from treedec.io.omnidocbench import page_to_omnidocbench

    c, t = time.process_time(), time.perf_counter()
    data = page_to_omnidocbench(drafter.draft(image, image_path))
    return data, DraftCost(time.process_time() - c, time.perf_counter() - t)


def run_in_pool(pool: ProcessPoolExecutor, image, image_path: str) -> Future:
    """A worker of `pool` drafts the page: the future of `draft_one`'s result."""
    return pool.submit(_work, image, image_path)


def _work(image, image_path: str) -> tuple[dict[str, Any], DraftCost]:
    return draft_one(multiprocessing.current_process().drafter, image, image_path)


def _warm(_: int) -> bool:
    multiprocessing.current_process().drafter._load()
    return True


class Drafters:
    """The pipeline drafters of an owner (a strategy's runs): `here(config)`, the in-process
    drafter of a config; `pool(workers, config)`, a pool of drafting processes. Each is made
    once and kept (models load once) until `close()`, or until the owner is collected."""

    def __init__(self):
        self._here: dict[Any, Any] = {}
        self._pools: dict[tuple[int, str], ProcessPoolExecutor] = {}
        self._closer = weakref.finalize(self, _shutdown, self._pools)

    def here(self, config=None):
        """This process's drafter for `config` (None: the defaults); its models load on first use."""
        from treedec.ocr.pipeline import PipelineConfig, PipelineOCR

        config = config or PipelineConfig()
        if config not in self._here:
            self._here[config] = PipelineOCR(config)
        return self._here[config]

    def pool(self, workers: int, config) -> ProcessPoolExecutor:
        """A pool of `workers` drafting processes for `config`, models loaded in every worker
        before it is returned."""
        key = (workers, config.tag())
        if key not in self._pools:
            # spawn: the workers import the drafter only (no torch, no copy of this process's threads)
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker, initargs=(config,))
            list(pool.map(_warm, range(workers)))  # each task warms one idle worker
            self._pools[key] = pool
        return self._pools[key]

    def close(self) -> None:
        self._closer()


def _shutdown(pools: dict) -> None:
    for pool in pools.values():
        pool.shutdown(wait=False, cancel_futures=True)
    pools.clear()
