"""HSD: hierarchical speculative decoding from a pipeline OCR's drafts (training-free).

Stage 1: every draft region is cropped and decoded by the target model (prompt mode
`crop`; on a checkpoint without a crop prompt, its page prompt `flat`: the crop read as a
small page, its blocks' content the region's reading, `stage1_mode`) with the region's draft
as speculation; stage 2: the page is decoded by the base
strategy with drafts: the stage-1 outputs (`stage2_drafts=stage1`, as published) or those
and the pipeline's text as alternatives (`both`, the default: where a crop was misread the
pipeline's text still proposes). The base strategy is any fork strategy by name
(`strategy.base`): `sequential` (HSD as published), `padoc` (`padoc_hsd`: the layout
stream drafted from the draft layout, every content branch from the draft region its box
overlaps), `padoc_rows`, ... With `mtp=true`, MTP drafts where the page drafts propose
nothing (`treedec.drafters.mtp`). Acceptance is exact greedy, so the
pages equal the base strategy's; a page's depth is its stage-1 depth (its crops run in
parallel) plus its stage-2 depth.

treedec's additions, each a config switch (off = as published): `snap` (draft boxes and
crops on the model's patch grid, `VLM.page_grid`), `fuzzy` (matching with one token
different, `treedec.drafters.ngram`), `draft_len=adaptive` (`treedec.engine.draft_length`),
`layout=lines` (the layout stream, or the flat stream's block lines, drafted line by line
and field by field, `treedec.drafters.layout_lines`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from treedec.data.synth import Sample
from treedec.drafters.draft_noise import degrade
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import PageDraftDrafter, SequenceDrafter
from treedec.engine.draft import relaxed
from treedec.engine.draft_length import AdaptiveLength
from treedec.errors import UserError
from treedec.page import Block, Page
from treedec.serialize import EOS, page_to_flat
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.crop_read import crop_target, region_truth
from treedec.strategies.hsd_stream import DraftStream
from treedec.strategies.mtp import with_mtp
from treedec.strategies.sequential import flat_target
from treedec.strategies.speculation import fork_base
from treedec.tokenizer import Tokenizer
from treedec.training.examples import CROP_CATEGORIES, crop_image, snap_box


def _draft_pages(samples: list[Sample], source: str, cache_dir: str | None, ocr=None) -> dict:
    if source == "oracle":  # ground truth as drafts: an upper bound, for analysis
        return {s.name: s.page for s in samples if s.page is not None}
    from treedec.ocr.cache import draft_pages

    return draft_pages([s for s in samples if s.image is not None], cache_dir, config=ocr)


class TwoStages:
    """The `prepare` step: draft every page (pipeline OCR), then refine each draft region by
    decoding its crop with the target model (stage 1)."""

    def __init__(self, tok: Tokenizer, drafter: PageDraftDrafter, options: "HSDOptions", matcher: NgramMatcher):
        self.tok, self.drafter, self.matcher = tok, drafter, matcher
        self.source, self.stage1, self.cache_dir = options.drafts, options.stage1, options.cache_dir
        self.ocr = ocr_config(options.ocr)  # the pipeline drafter's config (None: its defaults)
        self.adaptive, self.stage2_drafts, self.snap = options.draft_len == "adaptive", options.stage2_drafts, options.snap
        self.noise = options.draft_noise

    def __call__(self, vlm, samples: list[Sample], runtime, progress: bool = True) -> dict[str, dict]:
        grids = model_grids(vlm, samples, self.snap)
        drafted = model_drafts(samples, self.source, self.cache_dir, grids, self.ocr, self.noise)
        figures = {name: self.figures() for name in drafted}
        pages = self.refine(vlm, samples, drafted, grids, runtime, progress, figures)
        self.drafter.pages, self.drafter._seqs, self.drafter.grids = pages, {}, grids
        return figures

    def draft_pages(self, vlm, samples: list[Sample]) -> dict:
        """Every page's draft before stage 1: what a runtime without stage 1 verifies (vLLM)."""
        return model_drafts(samples, self.source, self.cache_dir, model_grids(vlm, samples, self.snap), self.ocr,
                            self.noise)

    def take(self, vlm, drafted: list[tuple[Sample, Page | None, Any]], runtime, figures: dict[str, dict]) -> None:
        """Pages drafted elsewhere, `(sample, draft page or None, its DraftCost)` (drafting beside
        decoding, `treedec.strategies.hsd_stream`): their boxes on the model's grid, their stage
        1, and on to the drafter, as `__call__` does for all pages at once; `figures` gets theirs."""
        samples = [s for s, p, _ in drafted if p is not None]
        grids = model_grids(vlm, samples, self.snap)
        pages = fitted({s.name: p for s, p, _ in drafted if p is not None}, "pipeline", grids, self.noise)
        for s, p, cost in drafted:
            if p is not None:
                figures[s.name] = {**self.figures(), "draft_cpu_s": cost.cpu_s, "draft_wall_s": cost.wall_s}
        self.drafter.pages.update(self.refine(vlm, samples, pages, grids, runtime, False, figures))
        self.drafter.grids.update(grids)

    def figures(self) -> dict:
        """A drafted page's figures before stage 1."""
        return {"draft_source": self.source, "stage1_steps": 0, "stage1_crops": 0}

    def refine(self, vlm, samples: list[Sample], drafted: dict, grids: dict[str, int], runtime, progress: bool,
               figures: dict[str, dict]) -> dict:
        """What stage 2 drafts from, per page of `drafted`: with stage 1, a copy of its draft
        whose crop regions hold the model's reading of their crops (beside the draft itself,
        with stage2_drafts=both), each page's stage-1 figures added to `figures`. The crops are
        decoded by `runtime`, the Runtime that runs the pages (`treedec.runtimes.base`)."""
        if not self.stage1:
            return drafted
        pages = {n: copy.deepcopy(p) for n, p in drafted.items()}
        jobs = []  # (page name, its draft block, the block's crop)
        for s in samples:
            page = pages.get(s.name)
            if page is None or s.image is None:
                continue
            grid = grids.get(s.name)
            for k, b in enumerate(page.reading_order()):
                if b.category in CROP_CATEGORIES and b.content:
                    jobs.append((s.name, b, Sample(f"{s.name}#{k}", region_truth(s.page, b.bbox),
                                                   stage1_crop(s.image, b.bbox, grid))))
        mode = stage1_mode(vlm)
        seq = SequenceDrafter(self.matcher)
        seq.seqs = {c.name: [self.tok.encode(b.content if mode == "crop" else page_draft(b)) + [self.tok.eos_id]]
                    for _, b, c in jobs}
        crop_strategy = Strategy("hsd_stage1", mode, self.tok, crop_target if mode == "crop" else flat_target,
                                 drafter=AdaptiveLength(seq, self.matcher.max_depth) if self.adaptive else seq)
        # the pages' own runtime, not a fresh one: its `forward_passes` is a running total that a
        # run reads as a difference (`parse_pages`), so the crops' forwards count in the run's
        # (before decoding, or beside it with draft_workers), and its `decode` keeps no state a
        # nested run clobbers; a fresh runtime's passes would be lost (and on vLLM, a second engine)
        records = runtime.run(vlm, crop_strategy, [c for _, _, c in jobs], progress=progress,
                              warmup=False).records
        for (name, block, _), rec in zip(jobs, records):
            block.content = crop_reading(rec, mode)
            f = figures[name]
            f["stage1_prompt"] = mode
            f["stage1_steps"] = max(f["stage1_steps"], rec.steps)
            f["stage1_crops"] += 1
        return {n: [p, drafted[n]] for n, p in pages.items()} if self.stage2_drafts == "both" else pages


def stage1_mode(vlm) -> str:
    """The prompt stage 1 reads a crop with: `crop`, or, on a checkpoint trained without crops
    (HSD is training-free), its page prompt `flat`: the crop read as a small page."""
    return "crop" if vlm.has_prompt("crop") else "flat"


def page_draft(block) -> str:
    """A draft block as the flat form of a page holding it alone (what a crop read with the page
    prompt is drafted by), its box drafted as the whole crop; its end token left to the caller."""
    return page_to_flat(Page(1, 1, [Block(block.category, (0.0, 0.0, 1.0, 1.0), block.content)]))[: -len(EOS)]


def crop_reading(rec, mode: str) -> str:
    """A crop's reading from its record: in crop mode its text (its end token dropped); read
    with the page prompt, the content of the page's blocks in reading order."""
    if mode == "crop":
        return rec.text[: -len(EOS)] if rec.text.endswith(EOS) else rec.text
    return "\n".join(b.content for b in rec.page.reading_order() if b.content)


def model_drafts(samples: list[Sample], source: str, cache_dir: str | None, grids: dict[str, int], ocr=None,
                 noise: float = 0.0) -> dict:
    """Every sample's draft page (`_draft_pages`), its content degraded at character rate
    `noise` (`draft_noise.degrade`); a pipeline draft's boxes moved onto the model's patch
    grid of its page, where `grids` (`model_grids`) has one."""
    return fitted(_draft_pages(samples, source, cache_dir, ocr), source, grids, noise)


def fitted(pages: dict, source: str, grids: dict[str, int], noise: float) -> dict:
    """Draft pages (by name) as stage 2 and stage 1 read them: content degraded at rate
    `noise`, a pipeline draft's boxes moved onto its page's model grid where `grids` has one."""
    pages = {n: degrade(p, noise, n) for n, p in pages.items()}
    if source == "pipeline":
        pages = {n: on_grid(p, grids[n]) if n in grids else p for n, p in pages.items()}
    return pages


def ocr_config(options: dict | None):
    """The pipeline drafter's config from `strategy.ocr` (None: the drafter's defaults)."""
    if not options:
        return None
    from treedec.ocr.pipeline import PipelineConfig

    try:
        return PipelineConfig(**dict(options))
    except TypeError as e:
        raise UserError(f"bad strategy.ocr option: {e}") from None


def model_grids(vlm, samples: list[Sample], snap: bool) -> dict[str, int]:
    """With `snap`, each sample's model patch grid (`model_grid`), where it has one."""
    return {s.name: g for s in samples if (g := model_grid(vlm, s.image))} if snap else {}


def model_grid(vlm, image) -> int | None:
    """The model's patch grid in `image`'s pixels (`VLM.page_grid`); None for a model
    without one (Qwen3-VL resizes its images) or a page it shrinks."""
    return vlm.page_grid(image) if hasattr(vlm, "page_grid") else None


def stage1_crop(image, bbox, grid: int | None):
    """A drafted region's crop as stage 1 decodes it: with the model's `grid`, the box moved to
    the nearest grid lines and cut as the crop task was trained on; else box + 2 px."""
    return crop_image(image, snap_box(bbox, grid) if grid else bbox, grid=grid)


def on_grid(page, grid: int):
    """A copy of a draft page with every box moved to the nearest lines of the model's
    patch grid (`snap_box`): a model that reads one glyph per patch writes its boxes on that
    grid, so a drafter's box (tight on the ink) drafts the model's box digit for digit."""
    page = copy.deepcopy(page)
    for b in page.blocks:
        x1, y1, x2, y2 = snap_box(b.bbox, grid)
        b.bbox = (float(x1), float(y1), float(min(x2, page.width)), float(min(y2, page.height)))
    return page


@dataclass
class HSDOptions:
    """HSD's options (the keys of `conf/strategy/hsd.yaml`): `base` is any fork strategy by
    name; `mtp` adds MTP drafts where the page drafts propose nothing (`treedec.drafters.mtp`)."""
    base: str = "sequential"
    drafts: str = "pipeline"
    stage1: bool = True
    cache_dir: str | None = None
    w_min: int = 3
    w_max: int = 10
    max_depth: int = 15
    max_nodes: int = 128
    relaxed_threshold: float | None = None
    draft_len: str = "adaptive"
    stage2_drafts: str = "both"
    fuzzy: int = 4
    snap: bool = True
    layout: str = "lines"
    mtp: bool = False
    k: int = 6  # with mtp: MTP look-ahead depths
    head: str | None = None  # with mtp: the MTP head's folder (null: beside the model's checkpoint)
    draft_workers: int = 0  # pipeline drafts made in this many processes beside decoding (0: all before decoding)
    draft_ahead: int = 8  # with draft_workers: pages drafted ahead of the engine at most (back-pressure)
    ocr: dict | None = None  # the pipeline drafter's options (treedec.ocr.pipeline.PipelineConfig); null: its defaults
    draft_noise: float = 0.0  # degraded drafts: content characters edited at this rate (treedec.drafters.draft_noise)

    def __post_init__(self):
        if self.drafts not in ("pipeline", "oracle"):
            raise UserError(f"strategy.drafts must be pipeline or oracle, got {self.drafts!r}")
        if self.draft_len not in ("fixed", "adaptive"):
            raise UserError(f"strategy.draft_len must be fixed or adaptive, got {self.draft_len!r}")
        if self.stage2_drafts not in ("stage1", "both"):
            raise UserError(f"strategy.stage2_drafts must be stage1 or both, got {self.stage2_drafts!r}")
        if self.relaxed_threshold is not None and not 0 < self.relaxed_threshold <= 1:
            raise UserError(f"strategy.relaxed_threshold must be in (0, 1] or null, got {self.relaxed_threshold}")
        if self.fuzzy != 0 and self.fuzzy < 2:
            raise UserError(f"strategy.fuzzy must be 0 (off) or a window of at least 2 tokens, got {self.fuzzy}")
        if self.draft_workers < 0 or self.draft_ahead < 1:
            raise UserError(f"strategy.draft_workers must be >= 0 and strategy.draft_ahead >= 1, "
                            f"got {self.draft_workers} and {self.draft_ahead}")
        if not 0 <= self.draft_noise <= 1:
            raise UserError(f"strategy.draft_noise must be a rate in [0, 1], got {self.draft_noise}")
        if self.layout not in ("ngram", "lines"):
            raise UserError(f"strategy.layout must be ngram or lines, got {self.layout!r}")


def _hsd(tokenizer: Tokenizer, name: str, options: dict, **defaults) -> Strategy:
    try:
        o = HSDOptions(**{**defaults, **options})
    except TypeError as e:
        raise UserError(f"bad config for strategy {name!r}: {e}") from None
    matcher = NgramMatcher(o.w_min, o.w_max, o.max_depth, o.max_nodes, o.fuzzy)
    strategy = fork_base(tokenizer, o.base, name)
    pages = PageDraftDrafter(tokenizer, "flat" if strategy.mode == "flat" else "tree", matcher, layout=o.layout)
    strategy.drafter = AdaptiveLength(pages, o.max_depth) if o.draft_len == "adaptive" else pages
    strategy.prepare = TwoStages(tokenizer, pages, o, matcher)
    if o.draft_workers and o.drafts == "pipeline":  # drafting beside decoding (runtimes.embedded uses `prepare.stream`)
        strategy.prepare.stream = DraftStream(strategy.prepare, o.draft_workers, o.draft_ahead)
    if o.mtp:  # page drafts where they match, MTP where they do not
        with_mtp(strategy, o.k, o.head)
    if o.relaxed_threshold is not None:  # lossy: pages may differ from the base strategy's
        strategy.acceptor = relaxed(o.relaxed_threshold)
        strategy.name += "_relaxed"
    return strategy


@STRATEGIES.register("hsd")
def hsd(tokenizer: Tokenizer, **options) -> Strategy:
    """HSD: the base strategy (sequential by default) verified against pipeline drafts (as
    published with stage2_drafts=stage1, fuzzy=0, layout=ngram, snap=false); keyword
    options: `HSDOptions`."""
    return _hsd(tokenizer, "hsd", options)


@STRATEGIES.register("padoc_hsd")
def padoc_hsd(tokenizer: Tokenizer, **options) -> Strategy:
    """The composition nobody published: PaDoc's branches, each speculated from its region's draft."""
    return _hsd(tokenizer, "padoc_hsd", options, base="padoc", draft_len="fixed")
