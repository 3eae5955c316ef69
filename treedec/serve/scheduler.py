"""Continuous batching for the server: one engine (`treedec.engine.Engine`) in a thread of its
own decodes every request in flight, as it decodes the pages of a batch run. A request joins the
running engine at its next step (the engine's item iterator hands it over the moment it is
queued; it waits on an empty queue only while nothing is in flight, so no request waits for a
batch to fill); at most `max_pages` are in flight (the engine's limit), at most `queue_size`
wait behind them, lower `priority` first, then in arrival order; past that, 429.

Each request's events reach its handler on the event loop (`Job.events`): its settled text
while it decodes (a streaming request), then its decoding (`PageDecoding`) or an error. A
request whose client left is dropped from the engine before the next step, its KV freed. An
error inside the engine fails the requests in flight, is logged in one line, and the engine is
built afresh: the server keeps serving."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from treedec.engine.engine import Engine, EngineConfig
from treedec.engine.page_decoding import PageDecoding
from treedec.engine.page_options import PageOptions
from treedec.models.adapter import Prompt
from treedec.serve.errors import ApiError
from treedec.serve.metrics import Metrics

log = logging.getLogger("treedec.serve")
_STOP = object()


@dataclass(eq=False)
class Job:
    """One request in the server: what the engine decodes, and where its events go."""
    id: str
    prompt: Prompt
    sample: Any
    options: PageOptions
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue
    priority: int = 0
    stream: bool = False
    settled: Callable[[Any], str] | None = None  # graph -> the text no later token changes (streaming)
    t_arrive: float = field(default_factory=time.perf_counter)
    t_admit: float | None = None
    cancelled: bool = False
    sent: str = ""  # the text already streamed

    def put(self, kind: str, value: Any = None) -> None:
        """An event for the handler, from the engine's thread."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is closed (the server is shutting down)
            pass


class Scheduler:
    def __init__(self, make_engine: Callable[[], Engine], queue_size: int, metrics: Metrics):
        self.make_engine, self.queue_size, self.metrics = make_engine, queue_size, metrics
        self.engine = make_engine()
        self._passes = 0  # the engine's forward passes counted into the metrics so far
        self._waiting: list[tuple[int, int, Job]] = []  # (priority, arrival, job): a heap
        self._count = itertools.count()
        self._cond = threading.Condition()
        self._stopping = False
        self.in_flight: dict[str, Job] = {}
        self.drafting = 0  # requests being drafted before they queue (counted as waiting)
        self._thread = threading.Thread(target=self._serve, name="treedec-engine", daemon=True)

    # ------------------------------------------------------------------ the handlers' side
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Finish what is in flight and queued, then end the engine's thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)

    @property
    def waiting(self) -> int:
        return len(self._waiting) + self.drafting

    def room(self) -> None:
        """A 429 (with Retry-After) where the queue is full."""
        if self.waiting >= self.queue_size:
            raise ApiError(429, f"the server's queue is full ({self.queue_size} requests wait behind the "
                                f"{self.engine.cfg.max_pages} in flight: serve.queue_size, runtime.max_pages); retry",
                           headers={"Retry-After": "1"})

    def submit(self, job: Job) -> None:
        with self._cond:
            self.room()
            heapq.heappush(self._waiting, (job.priority, next(self._count), job))
            self.metrics.waiting.set(self.waiting)
            self._cond.notify()

    def cancel(self, job: Job) -> None:
        """The client left: the job is dropped (from the queue when taken, from the engine before its next step)."""
        job.cancelled = True
        with self._cond:
            self._cond.notify()

    # ------------------------------------------------------------------ the engine's thread
    def _serve(self) -> None:
        while True:
            try:
                for record in self.engine.run(self._items(), between_steps=self._between):
                    self._finished(record)
                return  # the items ended: stopping, nothing in flight
            except Exception as e:  # an engine failure fails the pages in flight, never the server
                log.error("the engine failed (%s: %s); %d request(s) in flight answered 500, engine rebuilt",
                          type(e).__name__, e, len(self.in_flight))
                for job in self.in_flight.values():
                    job.put("error", f"the engine failed: {type(e).__name__}: {e}")
                self.in_flight.clear()
                self.metrics.running.set(0)
                self.engine, self._passes = self.make_engine(), 0

    def _items(self):
        while True:
            job = self._take(block=not self.engine.active)
            if job is _STOP:
                return
            if job is None:  # none ready: the engine steps the pages in flight and asks again
                yield None
                continue
            job.t_admit = time.perf_counter()
            self.in_flight[job.id] = job
            self.metrics.queue_time.observe(job.t_admit - job.t_arrive)
            self.metrics.running.set(len(self.in_flight))
            yield job.id, job.prompt, job.sample, job.options

    def _take(self, block: bool):
        """The next job to admit (None: none ready; `_STOP`: stopping and none left), waiting for one
        where `block` (nothing in flight)."""
        with self._cond:
            while True:
                while self._waiting and self._waiting[0][2].cancelled:
                    heapq.heappop(self._waiting)
                if self._waiting:
                    job = heapq.heappop(self._waiting)[2]
                    self.metrics.waiting.set(self.waiting)
                    return job
                if self._stopping:
                    return _STOP
                if not block:
                    return None
                self._cond.wait()

    def _between(self, engine: Engine) -> None:
        """After a step: drop the pages whose clients left; stream the settled text of the others."""
        self.metrics.steps.inc(engine.forward_passes - self._passes)
        self._passes = engine.forward_passes
        for job in list(self.in_flight.values()):
            if job.cancelled:
                engine.drop(job.id)
                del self.in_flight[job.id]
                self.metrics.running.set(len(self.in_flight))
            elif job.stream and job.settled is not None:
                page = next((p for p in engine.active if p.record.name == job.id), None)
                if page is None:
                    continue
                text = job.settled(page.graph)
                if len(text) > len(job.sent) and text.startswith(job.sent):
                    job.put("text", text[len(job.sent):])
                    job.sent = text

    def _finished(self, record: PageDecoding) -> None:
        job = self.in_flight.pop(record.name, None)
        self.metrics.running.set(len(self.in_flight))
        if job is None or job.cancelled:
            return
        job.put("done", record)
