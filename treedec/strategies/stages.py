"""What a strategy declares about work around its own decode, each model run of it a stage of
its own. A strategy only describes the stages (which samples, read how, merged how); it never
runs a model: `treedec.run.stages.run_strategy` calls `runtime.run` once per stage and merges
their figures into one run.

- `BeforeDecoding` (HSD): every page drafted whole (no model: a pipeline OCR, in this process
  or in worker processes beside the model's runs), then optionally stage 1 (`Stage1`: the
  drafted regions read from their crops, one `runtime.run`), then each page's drafts, refined
  by its crops' readings, handed to the run's draft source before the page decode
  (`Strategy.for_run`: every run has a source of its own).
- `AfterDecoding` (`crops`): after the page decode (the layout pass; none where the layout is a
  detector's), every region of each page read from its crop (one `runtime.run`), the page made
  of the readings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Protocol

from treedec.page import Page


@dataclass
class Drafted:
    """A page drafted before decoding: its sample, its draft page (None: the sample has no
    image, nothing was drafted), what drafting it cost in a worker (`treedec.ocr.pool.DraftCost`;
    None when drafted in this process), and the model's patch grid on it (None: none)."""
    sample: Any
    page: Page | None
    cost: Any = None
    grid: int | None = None


class Stage1(Protocol):
    """One run's stage 1: `strategy` reads the crops that `crops` cuts from each drafted page."""
    strategy: Any  # the `treedec.strategies.base.Strategy` that reads the crops

    def crops(self, vlm, drafted: Drafted) -> list[tuple[Any, Any]]:
        """(crop sample, its drafts) for each crop of a drafted page: the drafts handed to the
        run's source of `strategy` (`use(name, drafts)`) before the crop is read."""


class BeforeDecoding(Protocol):
    cache_dir: str | None  # the draft cache folder the config names; None: the run's own (cold: an empty one)
    beside: bool  # pages drafted in worker processes beside the model's runs (the runtime may take them lazily)

    def drafted(self, vlm, samples: Iterable, cache_dir: str | None, beside: bool, progress: bool) -> Iterator:
        """Every sample as `Drafted`, in input order; with `beside`, None between them while the
        next draft is not done (the engine steps the pages it has meanwhile); `progress`: a bar while drafting (none in a
        run's untimed warm-up)."""

    def stage1(self, vlm) -> Stage1 | None:
        """This run's stage 1 on `vlm`, or None (no stage 1)."""

    def use(self, vlm, drafted: Drafted, readings: list, source) -> dict[str, Any]:
        """Hand a page's drafts to `source` (the run's draft source of the strategy), refined by
        `readings` (the stage-1 records of its crops, in `Stage1.crops` order); the page's figures."""


class AfterDecoding(Protocol):
    decodes_pages: bool  # the pages are decoded first (a layout pass); else their layout is a detector's (`prepare`)
    cache_dir: str | None  # the draft cache folder the config names; None: the run's own (cold: an empty one)

    def prepare(self, vlm, samples: list, cache_dir: str | None, progress: bool) -> Any:
        """What is known of the pages before any model runs (no model: draft pages, a detector's
        layouts; None: nothing), handed to the calls below."""

    def detected(self, strategy: Any, samples: list) -> Any:
        """Where `decodes_pages` is false: the pages as a `treedec.records.RunResult` of no model run
        (each page's decoding an empty graph that its crops' reads join)."""

    def layout_drafts(self, known: Any, sample) -> list[list[int]]:
        """Drafts of the page's layout pass, as token sequences ([]: none)."""

    def reader(self, vlm) -> Any:
        """The `treedec.strategies.base.Strategy` that reads a region's crop on `vlm`."""

    def regions(self, vlm, decoding, known: Any) -> list[tuple[int, Any, list[list[int]]]]:
        """(where the region goes back into the page, the region's crop sample, the crop's drafts)
        for each region of a page (`decoding`: its layout pass, or its empty graph) to read."""

    def record(self, result, reads: list[tuple[int, Any]], strategy: Any, known: Any) -> Any:
        """The page's `treedec.records.PageRecord` from its decoding (`result`,
        `treedec.engine.page_decoding.PageDecoding`: its steps and timeline extended) and each
        region's reading (`(where, its PageDecoding)`)."""
