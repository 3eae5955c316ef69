"""Parse pages with a strategy on the embedded engine: samples in, parsed pages and
per-page figures out (steps, tokens, latency, flags). Shared by `run` and the benchmarks."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

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


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], engine_cfg: EngineConfig,
                progress: bool = True, warmup: bool = True) -> RunResult:
    """Decode every sample; `warmup` first decodes one page untimed (first calls into
    torch are slow, and a speed ratio must not charge that to whichever runs first)."""
    from tqdm import tqdm

    samples = list(samples)
    t_start = time.perf_counter()
    before = strategy.prepare(vlm, samples, engine_cfg, progress) if strategy.prepare else {}
    records, items = split_readable(samples, lambda s: vlm.prompt(s.image, strategy.mode))
    if warmup and items:
        list(Engine(vlm.adapter(), strategy, engine_cfg).run(items[:1]))
    engine = Engine(vlm.adapter(), strategy, engine_cfg)
    bar = tqdm(total=len(items), desc=strategy.name, unit="page", disable=not progress)
    t0 = time.perf_counter()
    for r in engine.run(items):
        records[r.name] = _record(r, strategy)
        bar.update(1)
    bar.close()
    for name, extra in before.items():  # work done before decoding (HSD stage 1) is on the page's path
        if name in records:
            records[name].steps += extra.get("stage1_steps", 0)
            records[name].extra = extra
    wall = time.perf_counter() - (t_start if before else t0)
    return RunResult(strategy.name, [records[s.name] for s in samples], wall, engine.forward_passes)


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
                      flags, r.timeline, sample.page, r.drafted, r.accepted, by_depth=r.by_depth)
