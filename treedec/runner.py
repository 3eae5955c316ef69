"""Parse pages with a strategy: samples in, parsed pages and per-page figures out (steps,
tokens, latency, flags). `parse_pages` is the one copy of the per-page bookkeeping every
runtime shares (`treedec.runtimes.base.Runtime`); `EmbeddedRuntime` is the embedded
engine's side of it (`runtime=embedded`, the default). Shared by `run` and the benchmarks."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from treedec import phases
from treedec.data.files import FileSample
from treedec.data.synth import Sample
from treedec.engine.engine import PENDING, Engine, EngineConfig, PageResult
from treedec.models.vlm import VLM
from treedec.page import Page
from treedec.serialize import parse_flat
from treedec.strategies.base import Strategy

if TYPE_CHECKING:
    from treedec.runtimes.base import Runtime


@dataclass
class PageRecord:
    name: str
    page: Page  # the parsed prediction (empty when the page could not be decoded)
    text: str  # the flat form the model produced
    steps: int = 0
    generated: int = 0
    streams: int = 0
    latency_s: float = 0.0
    queue_s: float = 0.0
    flags: list[str] = field(default_factory=list)
    timeline: list[list[int]] = field(default_factory=list)
    gt: Page | None = None
    drafted: int = 0
    accepted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    by_depth: list[list[int]] = field(default_factory=list)  # drafts per depth: engine.PageState.by_depth

    @property
    def accepted_per_step(self) -> float:
        """Tokens a stream gains per forward it takes part in (1 without drafts; HSD's AAL)."""
        stream_steps = sum(len(t) for t in self.timeline)
        return self.generated / stream_steps if stream_steps else 0.0

    @property
    def root_steps(self) -> int:
        """Steps up to the root stream's last (the layout stream of a tree: how much of the
        critical path the layout takes; all of it for one stream)."""
        root = self.timeline[0][0] if self.timeline and self.timeline[0] else None
        return max((i + 1 for i, t in enumerate(self.timeline) if root in t), default=0)

    def figures(self) -> dict[str, Any]:
        return {"steps": self.steps, "root_steps": self.root_steps, "generated_tokens": self.generated,
                "streams": self.streams,
                "tokens_per_step": self.generated / self.steps if self.steps else 0.0,
                "accepted_per_step": self.accepted_per_step,
                "latency_s": self.latency_s, "queue_s": self.queue_s, "drafted_tokens": self.drafted,
                "accepted_tokens": self.accepted, **self.extra, "flags": self.flags}


@dataclass
class RunResult:
    strategy: str
    records: list[PageRecord]
    wall_s: float
    forward_passes: int
    attention: dict[str, Any] = field(default_factory=dict)  # the runtime's run figures (Runtime.figures): the
    # engine's padding waste (AttentionStats.figures), vLLM's prefix cache
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase of `wall_s` (treedec.phases)
    warmup_s: float = 0.0  # the untimed warm-up (one page, whole strategy)
    drafts: str | None = None  # where drafts came from: cold (empty cache) or a cache that may be warm
    runtime: str = "embedded"
    notes: list[str] = field(default_factory=list)  # where the runtime ran the strategy differently (Runtime.notes)
    # seconds every page waited before decoding took pages: the run's work before the runtime's
    # decoding started (drafting or stage 1 done for all pages first) and shared loading
    # charged from outside; drafting beside decoding is not in it (a page's queue_s holds its wait)
    before_s: float = 0.0

    def charge(self, phase: str, seconds: float) -> None:
        """Add time spent on this run's behalf elsewhere (loading the shared pages, writing
        outputs) to its wall time and phases; loading, done before the run, is waited for by
        every page (`before_s`)."""
        self.wall_s += seconds
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        if phase == "load":
            self.before_s += seconds


@dataclass
class EmbeddedConfig(EngineConfig):
    """`runtime=embedded` (treedec/conf/runtime/embedded.yaml): the engine's config, plus the
    torch threads of the process."""
    threads: int = 2
    name: str = "embedded"


class EmbeddedRuntime:
    """`runtime=embedded`: treedec's engine (`treedec.engine`), one flat forward per step over
    every live stream of every page in flight. It runs every strategy as it is asked."""

    name = "embedded"
    steps_counted = "forward passes in which the page had tokens in the batch (its prompt's prefill: one forward)"

    def __init__(self, cfg: EngineConfig | None = None):
        self.cfg = cfg or EngineConfig()
        self.forward_passes = 0
        self._engine: Engine | None = None

    @classmethod
    def from_cfg(cls, cfg: Any) -> "EmbeddedRuntime":
        from treedec.runtimes.base import config_from

        return cls(config_from(EmbeddedConfig, cfg, "runtime=embedded"))

    def check(self, vlm, strategy: Strategy) -> None:
        pass

    def notes(self, strategy: Strategy) -> list[str]:
        return []

    def prepare(self, vlm, strategy: Strategy, samples, progress: bool, clock: phases.PhaseClock
                ) -> tuple[dict[str, dict], Iterable[Sample]]:
        stream = getattr(strategy.prepare, "stream", None)
        if stream is not None:  # drafting beside decoding: pages reach the engine as they are drafted,
            figures: dict[str, dict] = {}  # each page's figures added as it is (a generator: nothing runs here)
            return figures, stream(vlm, samples, self.cfg, figures, clock)
        return (strategy.prepare(vlm, samples, self.cfg, progress) if strategy.prepare else {}), samples

    def prompt(self, vlm, strategy: Strategy, sample: Sample):
        return vlm.prompt(sample.image, strategy.mode)

    def decode(self, vlm, strategy: Strategy, items) -> Iterator[PageResult]:
        self._engine = Engine(vlm.adapter(), strategy, self.cfg)
        yield from self._engine.run(items)
        self.forward_passes = self._engine.forward_passes

    def figures(self) -> dict[str, Any]:
        return self._engine.attention_stats.figures() if self._engine else {}

    def run(self, vlm, strategy: Strategy, samples: Iterable[Sample], **kwargs) -> RunResult:
        return parse_pages(vlm, strategy, samples, self, **kwargs)


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], engine_cfg: "EngineConfig | Runtime",
                progress: bool = True, warmup: bool = True, cold_drafts: bool = True,
                on_record: Callable[["PageRecord"], None] | None = None) -> RunResult:
    """Decode every sample on a runtime (`engine_cfg`: a `Runtime`, or an `EngineConfig` for
    the embedded engine), end to end: drafting and stage 1 (`Runtime.prepare`), reading
    the pages and their prompts (image preprocessing), decoding; `phases` says where the wall
    time went (treedec.phases). `cold_drafts`: drafts from an empty cache, so the drafter's
    cost is in the figures. `warmup` first runs the whole strategy on one page untimed, with
    its own empty draft cache (first calls into torch and the drafter are slow, and a speed
    ratio must not charge that to whichever runs first); its time is `warmup_s`.

    Samples are read lazily: each is read and turned into its prompt only when the engine has
    room, so memory does not grow with the number of pages (a data set that re-reads its
    files on each iteration is iterated again by the warm-up and by HSD's `prepare`; a one-shot
    iterator is peeked, not re-read). `on_record` sees each page as it is finished (unreadable
    ones included), e.g. to write it at once."""
    runtime = EmbeddedRuntime(engine_cfg) if isinstance(engine_cfg, EngineConfig) else engine_cfg
    runtime.check(vlm, strategy)
    warmup_s = 0.0
    if strategy.prepare and iter(samples) is samples:  # `prepare` reads every page before decoding reads
        samples = list(samples)  # them again: a one-shot iterator would reach the engine empty
    first, samples = _first_readable(samples)
    if warmup and first is not None and not phases.nested():
        t = time.perf_counter()
        with phases.cold_drafts(cold_drafts), phases.clock():
            _decode(vlm, strategy, [first], runtime, False)
        warmup_s = time.perf_counter() - t
    with phases.cold_drafts(cold_drafts and not phases.nested()), phases.clock() as (clock, nested):
        records, names, wall, before_s = _decode(vlm, strategy, samples, runtime, progress, clock, on_record)
    given = getattr(strategy.prepare, "cache_dir", None)
    drafts = None if not strategy.prepare else f"folder {given} (may be warm)" if given else \
        "cold (empty cache)" if cold_drafts else "warm (cache as configured)"
    return RunResult(strategy.name, [records[n] for n in names], wall, runtime.forward_passes,
                     runtime.figures(), {} if nested else dict(clock.totals), warmup_s, drafts, runtime.name,
                     runtime.notes(strategy), before_s)


def _first_readable(samples: Iterable[Sample]) -> tuple[Sample | None, Iterable[Sample]]:
    """The first sample with an image, and the samples to iterate in full: a re-iterable data
    set as it is, a one-shot iterator with what was looked at chained back in front."""
    if iter(samples) is not samples:
        return next((s for s in samples if s.image is not None), None), samples
    seen: list[Sample] = []
    for s in samples:
        seen.append(s)
        if s.image is not None:
            return s, itertools.chain(seen, samples)
    return None, seen


def _decode(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], runtime: "Runtime", progress: bool,
            clock: phases.PhaseClock | None = None, on_record: Callable[["PageRecord"], None] | None = None
            ) -> tuple[dict[str, "PageRecord"], list[str], float, float]:
    """Records (by name), names in input order, the wall time of the whole (taken before
    the locals are torn down) and the seconds before the runtime started decoding."""
    from tqdm import tqdm

    clock = clock or phases.PhaseClock()
    records: dict[str, PageRecord] = {}
    names: list[str] = []  # input order
    t0 = time.perf_counter()
    # one phase open from start to end, so that the phases add up to the run's wall time; the
    # clock is exclusive: drafting, reading each page as the engine pulls it and writing are
    # timed as their own phases, not as "decode"
    with clock.phase("decode"):
        total = len(samples) if hasattr(samples, "__len__") else None
        with clock.phase("draft"):  # a run inside (stage 1) is timed as the phase "stage1"
            before, samples = runtime.prepare(vlm, strategy, samples, progress, clock)
        desc = strategy.name if runtime.name == "embedded" else f"{strategy.name} ({runtime.name})"
        bar = tqdm(total=total, desc=desc, unit="page", disable=not progress, smoothing=0.1)

        def done(rec: PageRecord) -> None:
            if rec.name in before:  # work done before decoding (HSD stage 1) is on the page's path
                rec.steps += before[rec.name].get("stage1_steps", 0)
                rec.extra = {**before[rec.name], **rec.extra}
            records[rec.name] = rec
            bar.update(1)
            if on_record:
                with clock.phase("write"):
                    on_record(rec)

        items = readable_items(samples, lambda s: runtime.prompt(vlm, strategy, s), names, done, clock)
        started = time.perf_counter()  # pages are submitted now: what came before, every page waited for
        try:
            results = runtime.decode(vlm, strategy, items)
            if strategy.after_decode:  # work after decoding (crops: the regions read from their crops)
                results = strategy.after_decode(vlm, results, runtime.cfg, progress)
            for r in results:
                done(page_record(r, strategy))
        finally:
            bar.close()
    return records, names, time.perf_counter() - t0, started - t0


def readable_items(samples: Iterable[Sample], prepare, names: list[str], unreadable_done: Callable[[PageRecord], None],
                   clock: phases.PhaseClock | None = None) -> Iterator[tuple[str, Any, Sample]]:
    """Lazily: `(name, prepare(sample), sample)` for each sample with an image; a sample
    without one becomes a flagged empty record passed to `unreadable_done` (kept, never
    dropped). Every name is appended to `names` in input order as it is read. Reading a
    sample and preparing it are timed as `clock`'s phase "load"."""
    clock = clock or phases.PhaseClock()
    it = iter(samples)
    while True:
        with clock.phase("load"):
            s = next(it, _END)
            if s is _END:
                return
            if s is not PENDING:
                names.append(s.name)
                item = None if s.image is None else (s.name, prepare(s), s)
        if s is PENDING:  # the next sample is not ready (drafting beside decoding): the engine steps meanwhile
            yield PENDING
        elif item is None:
            unreadable_done(unreadable(s))
        else:
            yield item


_END = object()


def unreadable(sample: Sample) -> PageRecord:
    """The record of a page whose image could not be read: empty, flagged with the reason, kept."""
    size = (sample.page.width, sample.page.height) if sample.page else (sample_size(sample) or (1000, 1000))
    reasons = [f for f in sample_flags(sample) if f.startswith("unreadable")]
    return PageRecord(sample.name, Page(*size, image_path=sample.name), "", gt=sample.page,
                      flags=(reasons or ["unreadable or missing image"]) + ["not decoded, scored as empty"]
                      + [f for f in sample_flags(sample) if not f.startswith("unreadable")])


def sample_size(sample: Sample) -> tuple[int, int] | None:
    """The page's own pixel size: a file page's size before any downscale, else its image's."""
    if isinstance(sample, FileSample) and sample.size:
        return sample.size
    return sample.image.size if sample.image is not None else None


def sample_flags(sample: Sample) -> list[str]:
    """What reading the sample found (file pages only: unreadable, downscaled, converted ...)."""
    return list(sample.flags) if isinstance(sample, FileSample) else []


def page_record(r: PageResult, strategy: Strategy) -> PageRecord:
    """A decoded page's record: its flat text parsed into a page, its figures, and its flags
    (what reading the sample found, the runtime's cuts, the parser's repairs)."""
    sample = r.sample
    width, height = sample_size(sample)
    text = strategy.flat_text(r.graph)
    parsed = parse_flat(text, width, height, image_path=sample.name)
    flags = sample_flags(sample) + list(r.flags) + [f"repaired: {x}" for x in parsed.repairs]
    return PageRecord(sample.name, parsed.page, text, r.steps, r.generated, len(r.graph), r.latency_s, r.queue_s,
                      flags, r.timeline, sample.page, r.drafted, r.accepted, dict(r.extra), by_depth=r.by_depth)
