"""What a run of a strategy gives back: a `RunResult` (the run's figures: wall time, phases,
forward passes, the runtime's notes) holding one `PageRecord` per page (the parsed page, its
flat text, its flags and its decoding: `treedec.engine.page_decoding.PageDecoding`), and how a
record is made from a decoded page (`page_record`) or from a page that could not be read
(`unreadable`) or decoded (`failed`). Every runtime returns these (`treedec.run.parse_pages.parse_pages`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from treedec.data.sample import Sample
from treedec.engine.page_decoding import PageDecoding
from treedec.page import Page
from treedec.strategies.base import Strategy


def _decoded(name: str, empty: Any) -> property:
    """A record's figure read from its decoding (`empty`'s kind, empty, when not decoded)."""
    return property(lambda rec: getattr(rec.decoding, name) if rec.decoding is not None else type(empty)())


@dataclass
class PageRecord:
    """A page as a run gives it back: the page parsed from its decoding, and the decoding
    itself (`PageDecoding`: steps, tokens, latency, drafts, as the runtime filled it; None for
    a page that could not be read). Its figures are read from the decoding, never copied."""
    name: str
    page: Page  # the parsed prediction (empty when the page could not be decoded)
    text: str  # the flat form the model produced
    decoding: PageDecoding | None = field(default=None, repr=False)  # None: not decoded
    gt: Page | None = None
    flags: list[str] = field(default_factory=list)  # what reading the sample found, the runtime's cuts, the repairs
    stage_figures: dict[str, Any] = field(default_factory=dict)  # of the stages around the decode (HSD's stage 1)
    # figures the record carries itself: a decoded page's root stream as fed and generated (root_io),
    # an earlier sitting's page the figures it wrote then (treedec.run.resume)
    kept: dict[str, Any] = field(default_factory=dict, repr=False)

    steps = _decoded("steps", 0)
    generated = _decoded("generated", 0)
    latency_s = _decoded("latency_s", 0.0)
    queue_s = _decoded("queue_s", 0.0)
    timeline = _decoded("timeline", [])
    drafted = _decoded("drafted", 0)
    accepted = _decoded("accepted", 0)
    by_depth = _decoded("by_depth", [])  # drafts per depth: PageDecoding.by_depth

    @property
    def streams(self) -> int:
        return len(self.decoding.graph) if self.decoding else 0

    @property
    def extra(self) -> dict[str, Any]:
        """The page's figures besides the decoding's own: its stages', those it keeps (`kept`), then
        its runtime's (vLLM: prefix cache)."""
        return {**self.stage_figures, **self.kept, **(self.decoding.extra if self.decoding else {})}

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
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase of `wall_s` (treedec.run.phases; a
    # strategy with stages: its stages' runs merged, treedec.run.stages)
    warmup_s: float = 0.0  # the untimed warm-up (one page, whole strategy)
    drafts: str | None = None  # where drafts came from: cold (empty cache) or a cache that may be warm
    runtime: str = "embedded"
    notes: list[str] = field(default_factory=list)  # where the runtime ran the strategy differently (Runtime.notes)
    # seconds every page waited before decoding took pages: the run's work before the runtime's
    # decoding started (drafting or stage 1 done for all pages first) and shared loading
    # charged from outside; drafting beside decoding is not in it (a page's queue_s holds its wait)
    before_s: float = 0.0
    forwards: Any = None  # the engine's forward passes, counted and timed (treedec.engine.forward_log.ForwardLog); None elsewhere
    projection: dict[str, Any] | None = None  # the cost model's (treedec.results.cost_model.project), where calibrated

    def charge(self, phase: str, seconds: float) -> None:
        """Add time spent on this run's behalf elsewhere (loading the shared pages, writing
        outputs) to its wall time and phases; loading, done before the run, is waited for by
        every page (`before_s`)."""
        self.wall_s += seconds
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        if phase == "load":
            self.before_s += seconds


def unreadable(sample: Sample) -> PageRecord:
    """The record of a page whose image could not be read: empty, flagged with the reason, kept."""
    reasons = [f for f in sample_flags(sample) if f.startswith("unreadable")]
    return not_decoded(sample, reasons or ["unreadable or missing image"],
                       [f for f in sample_flags(sample) if not f.startswith("unreadable")])


def failed(sample: Sample, error: BaseException) -> PageRecord:
    """The record of a page whose decoding raised (`run executor=ray`'s decoders): empty,
    flagged with the error, kept."""
    return not_decoded(sample, [f"decoding failed: {type(error).__name__}: {error}"], sample_flags(sample))


def not_decoded(sample: Sample, reasons: list[str], other_flags: list[str]) -> PageRecord:
    """An empty record of a page not decoded: why (`reasons`), that it was not, then its other flags."""
    size = (sample.page.width, sample.page.height) if sample.page else (sample_size(sample) or (1000, 1000))
    return PageRecord(sample.name, Page(*size, image_path=sample.name), "", gt=sample.page,
                      flags=reasons + ["not decoded, scored as empty" if sample.page is not None else "not decoded"]
                      + other_flags)


def sample_size(sample: Sample) -> tuple[int, int] | None:
    """The page's own pixel size: a file page's size before any downscale, else its image's."""
    return sample.pixel_size()


def sample_flags(sample: Sample) -> list[str]:
    """What reading the sample found (unreadable, downscaled, converted ...)."""
    return list(sample.flags)


def page_record(r: PageDecoding, strategy: Strategy) -> PageRecord:
    """A decoded page's record: its flat text parsed into a page, its decoding, and its flags
    (what reading the sample found, the runtime's cuts, the parser's repairs)."""
    sample = r.sample
    width, height = sample_size(sample)
    text, parsed = strategy.parse(r.graph, width, height, image_path=sample.name)
    flags = sample_flags(sample) + list(r.flags) + [f"repaired: {x}" for x in parsed.repairs]
    return PageRecord(sample.name, parsed.page, text, decoding=r, gt=sample.page, flags=flags,
                      kept=root_io(r, strategy))


def root_io(r: PageDecoding, strategy: Strategy) -> dict[str, Any]:
    """The root stream as fed and as generated, before parsing: `prompt` (text), `prompt_ids`
    (image placeholders expanded), `raw_text` and `output_ids`."""
    root, tok = r.graph[0], strategy.tokenizer
    prompt, output = root.tokens[:root.prompt_len], root.tokens[root.prompt_len:]
    return {"prompt": tok.decode(prompt), "prompt_ids": list(prompt), "raw_text": tok.decode(output),
            "output_ids": list(output)}
