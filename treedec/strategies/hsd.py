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
from dataclasses import dataclass, replace
from typing import Any, Iterator

from treedec.data.sample import Sample
from treedec.drafters.draft_noise import degrade
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import PageDraftDrafter
from treedec.engine.draft import relaxed
from treedec.engine.draft_length import AdaptiveLength
from treedec.errors import UserError
from treedec.formats import Format, get_format
from treedec.ocr.drafters import Drafters
from treedec.page import Page
from treedec.strategies.base import STRATEGIES, Strategy, options_of
from treedec.strategies.crops_regions import CropDrafts, format_crops
from treedec.strategies.draft_pages import draft_pages
from treedec.strategies.hsd_stage1 import CropReads, crop_blocks, crop_reading, model_grid, stage1_mode
from treedec.strategies.hsd_stream import drafted_beside
from treedec.strategies.mtp import with_mtp
from treedec.strategies.speculation import fork_base
from treedec.strategies.stages import Drafted
from treedec.tokenizer import Tokenizer
from treedec.training.examples import snap_box


class TwoStages:
    """HSD's work before decoding (`Strategy.before`, `treedec.strategies.stages.BeforeDecoding`):
    every page drafted (pipeline OCR, or the ground truth for `drafts=oracle`), its boxes on the
    model's grid; with `stage1`, each draft region read from its crop by the target model
    (`hsd_stage1.CropReads`); then the page's drafts handed to the run's draft source."""

    def __init__(self, tok: Tokenizer, options: "HSDOptions", matcher: NgramMatcher):
        self.tok, self.matcher = tok, matcher
        self.source, self.with_stage1, self.cache_dir = options.drafts, options.stage1, options.cache_dir
        self.ocr = ocr_config(options.ocr)  # the pipeline drafter's config (None: its defaults)
        self.adaptive, self.stage2_drafts, self.snap = options.draft_len == "adaptive", options.stage2_drafts, options.snap
        self.noise = options.draft_noise
        self.workers, self.ahead = options.draft_workers, options.draft_ahead
        self.beside = self.workers > 0 and self.source == "pipeline"
        self.drafters = Drafters()  # this strategy's pipeline drafter and worker pools: models load once for its runs
        self.fmt = get_format("treedec")  # the format stage 1's crop reads are written in (`Strategy.with_format`)

    def drafted(self, vlm, samples, cache_dir: str | None, beside: bool, progress: bool = True) -> Iterator:
        """Every sample as `Drafted` (its draft fitted: `fitted`), in input order; `beside`:
        drafted in worker processes, None while the next draft is not done (`hsd_stream`)."""
        if beside:
            for item in drafted_beside(samples, self.workers, self.ahead, cache_dir, self.ocr, self.drafters):
                yield None if item is None else self._fitted(vlm, *item)
            return
        pages = draft_pages(samples, self.source, cache_dir, self.ocr, progress, self.drafters)
        for s in samples:
            yield self._fitted(vlm, s, pages.get(s.name))

    def _fitted(self, vlm, sample: Sample, page: Page | None, cost=None) -> Drafted:
        grid = model_grid(vlm, sample.image) if self.snap and page is not None else None
        if page is not None:
            page = fitted({sample.name: page}, self.source, {sample.name: grid} if grid else {}, self.noise)[sample.name]
        return Drafted(sample, page, cost, grid)

    def stage1(self, vlm) -> CropReads | None:
        return CropReads(self.tok, self.matcher, vlm, self.adaptive, self.fmt) if self.with_stage1 else None

    def use(self, vlm, d: Drafted, readings: list, source) -> dict[str, Any]:
        """The page's drafts for stage 2, handed to the run's `source`: with stage 1, a copy of its
        draft whose crop regions hold the model's reading of their crops (beside the draft itself,
        with stage2_drafts=both)."""
        if d.page is None:
            return {}
        figures = {"draft_source": self.source, "stage1_steps": 0, "stage1_crops": 0}
        if d.cost is not None:
            figures.update(draft_cpu_s=d.cost.cpu_s, draft_wall_s=d.cost.wall_s)
        if d.page.info.get("draft_flag"):
            figures["draft_flag"] = d.page.info["draft_flag"]
        pages: Page | list[Page] = d.page
        if self.with_stage1 and d.sample.image is not None:
            refined, mode = copy.deepcopy(d.page), stage1_mode(vlm)
            for b, rec in zip(crop_blocks(refined), readings):
                b.content = crop_reading(rec, mode)
            figures.update(stage1_prompt=mode, stage1_steps=max((r.steps for r in readings), default=0),
                           stage1_crops=len(readings))
            pages = [refined, d.page] if self.stage2_drafts == "both" else refined
        source.use(d.sample.name, pages, d.grid)
        return figures


def fitted(pages: dict, source: str, grids: dict[str, int], noise: float) -> dict:
    """Draft pages (by name) as stage 2 and stage 1 read them: content degraded at rate
    `noise`, a pipeline draft's boxes moved onto its page's model grid where `grids` has one."""
    pages = {n: degrade(p, noise, n) for n, p in pages.items()}
    if source != "oracle":  # the pipeline's drafts, made now or beforehand
        pages = {n: on_grid(p, grids[n]) if n in grids else p for n, p in pages.items()}
    return pages


def ocr_config(options: dict | None):
    """The pipeline drafter's config from `strategy.ocr` (None: the drafter's defaults)."""
    from treedec.ocr.pipeline import config_of

    return config_of(options, "strategy.ocr")


def on_grid(page, grid: int):
    """A copy of a draft page with every box moved to the nearest lines of the model's
    patch grid (`snap_box`): a model that reads one glyph per patch writes its boxes on that
    grid, so a drafter's box (tight on the ink) drafts the model's box digit for digit."""
    page = copy.deepcopy(page)
    for b in page.blocks:
        x1, y1, x2, y2 = snap_box(b.bbox, grid)
        b.bbox = (float(x1), float(y1), float(min(x2, page.width)), float(min(y2, page.height)))
    return page


def two_stage_hsd(strategy: Strategy, fmt: Format, o: "HSDOptions", matcher: NgramMatcher) -> Strategy | None:
    """hsd in a two-stage format (None: any other, spoken as a strategy speaks it): its baseline
    `crops`, each crop read (and the layout pass, where the format has one) speculated from the
    page's drafts (`treedec.strategies.crops_regions`)."""
    if not fmt.two_stage:
        return None
    if o.base != "sequential" or o.mtp or o.relaxed_threshold is not None:
        raise UserError(f"strategy={strategy.name} in format {fmt.name!r} speculates its crop reads (base crops): "
                        "strategy.base=sequential, mtp=false and no relaxed_threshold there")
    drafts = CropDrafts(o.drafts, o.cache_dir, ocr_config(o.ocr), matcher, o.draft_len == "adaptive")
    return format_crops(strategy.name, strategy.tokenizer, fmt, drafts)


@dataclass
class HSDOptions:
    """HSD's options, and padoc_hsd's (the keys of `conf/strategy/hsd.yaml`; registered with
    Hydra as `schema/strategy_hsd`): `base` is any fork strategy by name, with its own options
    `base_options`; `mtp` adds MTP drafts where the page drafts propose nothing (`treedec.drafters.mtp`)."""
    name: str = "hsd"
    base: str = "sequential"  # the fork strategy speculated on, by name: sequential | padoc | padoc_rows | ...
    # the base's own options (e.g. a fork rule's), checked against its factory (a mapping; Any: OmegaConf cannot
    # set a dict into a null typed-dict node)
    base_options: Any = None
    # pipeline | oracle (ground truth as drafts: an upper bound for analysis) | a folder of drafts made beforehand
    # (`python -m treedec draft out=DIR`; treedec.ocr.folder)
    drafts: str = "pipeline"
    stage1: bool = True  # each draft region read from its crop by the model first (treedec.strategies.hsd_stage1)
    cache_dir: str | None = None  # draft cache; null = ~/.cache/treedec/drafts (a run's own empty one, cold_drafts)
    w_min: int = 3
    w_max: int = 10
    max_depth: int = 15
    max_nodes: int = 128
    # e.g. 0.3: also accept draft tokens with p >= 0.3 (LOSSY; the strategy is reported as <name>_relaxed)
    relaxed_threshold: float | None = None
    # fixed: propose up to max_depth | adaptive: per stream, double after a fully accepted draft, else accepted + 1
    # (treedec.engine.draft_length)
    draft_len: str = "adaptive"
    # stage 2 drafts: stage1 (the crops' readings, as published) | both (those and the pipeline's, as alternatives)
    stage2_drafts: str = "both"
    fuzzy: int = 4  # no exact match: the last 4 tokens may match a draft with one token different (0 = off, published)
    # pipeline boxes and stage-1 crops on the model's patch grid, where it reads one glyph per patch (VLM.page_grid)
    snap: bool = True
    # the root stream drafted line by line, field by field (treedec.drafters.layout_lines) | ngram (as published)
    layout: str = "lines"
    mtp: bool = False  # MTP drafts (treedec.drafters.mtp) where the page drafts propose nothing
    k: int = 6  # with mtp: MTP look-ahead depths
    head: str | None = None  # with mtp: the MTP head's folder (null: beside the model's checkpoint)
    draft_workers: int = 0  # pipeline drafts made in this many processes beside decoding (0: all before decoding)
    draft_ahead: int = 8  # with draft_workers: pages drafted ahead of the engine at most (back-pressure)
    ocr: Any = None  # a mapping: the pipeline drafter's options (treedec.ocr.pipeline.PipelineConfig); null: its defaults
    draft_noise: float = 0.0  # degraded drafts: content characters edited at this rate (treedec.drafters.draft_noise)

    def __post_init__(self):
        if self.drafts not in ("pipeline", "oracle"):
            from treedec.ocr.folder import drafts_dir

            drafts_dir(self.drafts)  # a folder of drafts, or a one-line error
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


def _hsd(tokenizer: Tokenizer, name: str, options: dict, **preset) -> Strategy:
    o = options_of(HSDOptions, name, {**preset, **options})
    matcher = NgramMatcher(o.w_min, o.w_max, o.max_depth, o.max_nodes, o.fuzzy)
    base = fork_base(tokenizer, o.base, name, o.base_options)
    pages = PageDraftDrafter(tokenizer, "flat" if base.mode == "flat" else "tree", matcher, layout=o.layout)
    before = TwoStages(tokenizer, o, matcher)
    strategy = replace(base, drafter=AdaptiveLength(pages, o.max_depth) if o.draft_len == "adaptive" else pages,
                       before=before, needs=("block_text",),  # drafts matched on the format's text
                       speaks=(pages, before), respeak=lambda s, fmt: two_stage_hsd(s, fmt, o, matcher))
    if o.mtp:  # page drafts where they match, MTP where they do not
        strategy = with_mtp(strategy, o.k, o.head)
    if o.relaxed_threshold is not None:  # lossy: pages may differ from the base strategy's
        strategy = replace(strategy, acceptor=relaxed(o.relaxed_threshold), name=f"{strategy.name}_relaxed")
    return strategy


@STRATEGIES.register("hsd")
def hsd(tokenizer: Tokenizer, **options) -> Strategy:
    """HSD: the base strategy (sequential by default) verified against pipeline drafts (as
    published with stage2_drafts=stage1, fuzzy=0, layout=ngram, snap=false); keyword
    options: `HSDOptions`."""
    return _hsd(tokenizer, "hsd", options)


@STRATEGIES.register("padoc_hsd")
def padoc_hsd(tokenizer: Tokenizer, **options) -> Strategy:
    """The composition nobody published, a preset of `hsd`: PaDoc's branches, each speculated
    from its region's draft, drafts proposed up to `max_depth` (`draft_len=fixed`)."""
    return _hsd(tokenizer, "padoc_hsd", options, base="padoc", draft_len="fixed")
