"""Parse pages with a strategy on the embedded engine: samples in, parsed pages and
per-page figures out (steps, tokens, latency, flags). Shared by `run` and the benchmarks."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from treedec.data.files import FileSample
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


def parse_pages(vlm: VLM, strategy: Strategy, samples: Iterable[Sample], engine_cfg: EngineConfig,
                progress: bool = True, warmup: bool = True,
                on_record: Callable[[PageRecord], None] | None = None) -> RunResult:
    """Decode every sample; `warmup` first decodes one page untimed (first calls into
    torch are slow, and a speed ratio must not charge that to whichever runs first).

    Samples are read lazily: each is turned into its prompt only when the engine has room,
    so memory does not grow with the number of pages (a data set that re-reads its files
    on each iteration is iterated once; HSD's `prepare` iterates it again). `on_record` sees
    each page as it is finished (unreadable ones included), e.g. to write it at once."""
    from tqdm import tqdm

    t_start = time.perf_counter()
    before = strategy.prepare(vlm, samples, engine_cfg, progress) if strategy.prepare else {}
    records: dict[str, PageRecord] = {}
    names: list[str] = []  # input order
    total = len(samples) if hasattr(samples, "__len__") else None
    bar = tqdm(total=total, desc=strategy.name, unit="page", disable=not progress, smoothing=0.1)

    def done(rec: PageRecord) -> None:
        if rec.name in before:  # work done before decoding (HSD stage 1) is on the page's path
            rec.steps += before[rec.name].get("stage1_steps", 0)
            rec.extra = before[rec.name]
        records[rec.name] = rec
        bar.update(1)
        if on_record:
            on_record(rec)

    items = readable_items(samples, lambda s: vlm.prompt(s.image, strategy.mode), names, done)
    first = next(items, None)
    if warmup and first is not None:
        list(Engine(vlm.adapter(), strategy, engine_cfg).run([first]))
    engine = Engine(vlm.adapter(), strategy, engine_cfg)
    t0 = time.perf_counter()
    try:
        for r in engine.run(itertools.chain([first] if first is not None else [], items)):
            done(_record(r, strategy))
    finally:
        bar.close()
    wall = time.perf_counter() - (t_start if before else t0)
    return RunResult(strategy.name, [records[n] for n in names], wall, engine.forward_passes,
                     engine.attention_stats.figures())


def readable_items(samples: Iterable[Sample], prepare, names: list[str], unreadable_done: Callable[[PageRecord], None]
                   ) -> Iterator[tuple[str, Any, Sample]]:
    """Lazily: `(name, prepare(sample), sample)` for each sample with an image; a sample
    without one becomes a flagged empty record passed to `unreadable_done` (kept, never
    dropped). Every name is appended to `names` in input order as it is read."""
    for s in samples:
        names.append(s.name)
        if s.image is None:
            unreadable_done(unreadable(s))
        else:
            yield s.name, prepare(s), s


def split_readable(samples: Iterable[Sample], prepare) -> tuple[dict[str, "PageRecord"], list[tuple[str, Any, Sample]]]:
    """Pages without an image become flagged empty records (kept, never dropped); the others
    become `(name, prepare(sample), sample)` items for a runtime (all at once: the vLLM runtime)."""
    records: dict[str, PageRecord] = {}
    items = list(readable_items(samples, prepare, [], lambda r: records.__setitem__(r.name, r)))
    return records, items


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


def _record(r: PageResult, strategy: Strategy) -> PageRecord:
    sample = r.sample
    width, height = sample_size(sample)
    text = strategy.flat_text(r.graph)
    parsed = parse_flat(text, width, height, image_path=sample.name)
    flags = sample_flags(sample) + list(r.flags) + [f"repaired: {x}" for x in parsed.repairs]
    return PageRecord(sample.name, parsed.page, text, r.steps, r.generated, len(r.graph), r.latency_s, r.queue_s,
                      flags, r.timeline, sample.page, r.drafted, r.accepted)
