"""Parse pages with a strategy on the embedded engine: samples in, parsed pages and
per-page figures out (steps, tokens, latency, flags). Shared by `run` and the benchmarks."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from treedec import phases
from treedec.data.synth import Sample
from treedec.engine.engine import Engine, EngineConfig, PageResult
from treedec.models.vlm import VLM
from treedec.page import Page
from treedec.serialize import parse_flat
from treedec.strategies.base import Strategy


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
    attention: dict[str, Any] = field(default_factory=dict)  # the engine's padding waste (AttentionStats.figures)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase of `wall_s` (treedec.phases)
    warmup_s: float = 0.0  # the untimed warm-up (one page, whole strategy)
    drafts: str | None = None  # where drafts came from: cold (empty cache) or a cache that may be warm

    def charge(self, phase: str, seconds: float) -> None:
        """Add time spent on this run's behalf elsewhere (loading the shared pages, writing
        outputs) to its wall time and phases."""
        self.wall_s += seconds
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], engine_cfg: EngineConfig,
                progress: bool = True, warmup: bool = True, cold_drafts: bool = True) -> RunResult:
    """Decode every sample, end to end: drafting and stage 1 (`strategy.prepare`), the
    prompts (image preprocessing), decoding; `phases_s` says where the wall time went
    (treedec.phases). `cold_drafts`: drafts from an empty cache, so the drafter's cost is
    in the figures. `warmup` first runs the whole strategy on one page untimed, with its
    own empty draft cache (first calls into torch and the drafter are slow, and a speed
    ratio must not charge that to whichever runs first); its time is `warmup_s`."""
    samples = list(samples)
    warmup_s = 0.0
    first = next((s for s in samples if s.image is not None), None)
    if warmup and first is not None and not phases.nested():
        t = time.perf_counter()
        with phases.cold_drafts(cold_drafts), phases.clock():
            _decode(vlm, strategy, [first], engine_cfg, False)
        warmup_s = time.perf_counter() - t
    with phases.cold_drafts(cold_drafts and not phases.nested()), phases.clock() as (clock, nested):
        t0 = time.perf_counter()
        records, engine = _decode(vlm, strategy, samples, engine_cfg, progress, clock)
        wall = time.perf_counter() - t0
    given = getattr(strategy.prepare, "cache_dir", None)
    drafts = None if not strategy.prepare else f"folder {given} (may be warm)" if given else \
        "cold (empty cache)" if cold_drafts else "warm (cache as configured)"
    return RunResult(strategy.name, [records[s.name] for s in samples], wall, engine.forward_passes,
                     engine.attention_stats.figures(), {} if nested else dict(clock.totals), warmup_s, drafts)


def _decode(vlm: VLM, strategy: Strategy, samples: list[Sample], engine_cfg: EngineConfig, progress: bool,
            clock: phases.PhaseClock | None = None) -> tuple[dict[str, "PageRecord"], Engine]:
    from tqdm import tqdm

    clock = clock or phases.PhaseClock()
    with clock.phase("draft"):  # a run inside (stage 1) is timed as the phase "stage1"
        before = strategy.prepare(vlm, samples, engine_cfg, progress) if strategy.prepare else {}
    with clock.phase("load"):
        records, items = split_readable(samples, lambda s: vlm.prompt(s.image, strategy.mode))
    with clock.phase("decode"):
        engine = Engine(vlm.adapter(), strategy, engine_cfg)
        bar = tqdm(total=len(items), desc=strategy.name, unit="page", disable=not progress)
        for r in engine.run(items):
            records[r.name] = _record(r, strategy)
            bar.update(1)
        bar.close()
    for name, extra in before.items():  # work done before decoding (HSD stage 1) is on the page's path
        if name in records:
            records[name].steps += extra.get("stage1_steps", 0)
            records[name].extra = extra
    return records, engine


def split_readable(samples: Iterable[Sample], prepare) -> tuple[dict[str, "PageRecord"], list[tuple[str, Any, Sample]]]:
    """Pages without an image become flagged empty records (kept, never dropped); the others
    become `(name, prepare(sample), sample)` items for a runtime."""
    records: dict[str, PageRecord] = {}
    items = []
    for s in samples:
        if s.image is None:
            records[s.name] = unreadable(s)
        else:
            items.append((s.name, prepare(s), s))
    return records, items


def unreadable(sample: Sample) -> PageRecord:
    """The record of a page whose image could not be read: empty, flagged, kept."""
    size = (sample.page.width, sample.page.height) if sample.page else (1000, 1000)
    return PageRecord(sample.name, Page(*size, image_path=sample.name), "", gt=sample.page,
                      flags=["unreadable or missing image: not decoded, scored as empty"])


def _record(r: PageResult, strategy: Strategy) -> PageRecord:
    sample = r.sample
    width, height = sample.image.size
    text = strategy.flat_text(r.graph)
    parsed = parse_flat(text, width, height, image_path=sample.name)
    flags = list(r.flags) + [f"repaired: {x}" for x in parsed.repairs]
    return PageRecord(sample.name, parsed.page, text, r.steps, r.generated, len(r.graph), r.latency_s, r.queue_s,
                      flags, r.timeline, sample.page, r.drafted, r.accepted)
