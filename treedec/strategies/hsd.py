"""HSD: hierarchical speculative decoding from a pipeline OCR's drafts (training-free).

Stage 1: every draft region is cropped and decoded by the target model (prompt mode
`crop`) with the region's draft as speculation; stage 2: the page is decoded by the base
strategy with drafts: the stage-1 outputs (`stage2_drafts=stage1`, as published) or those
and the pipeline's text as alternatives (`both`, the default: where a crop was misread the
pipeline's text still proposes). The base strategy is `sequential` (HSD as published) or
`padoc` (`padoc_hsd`: the layout stream drafted from the draft layout, every content
branch from the draft region its box overlaps). Acceptance is exact greedy, so the
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

from treedec.data.synth import Sample
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import PageDraftDrafter, SequenceDrafter
from treedec.engine.draft import relaxed
from treedec.engine.draft_length import AdaptiveLength
from treedec.errors import UserError
from treedec.serialize import EOS
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.padoc import layout_fork, tree_target
from treedec.strategies.sequential import flat_target
from treedec.tokenizer import Tokenizer
from treedec.training.examples import CROP_CATEGORIES, crop_image, snap_box


def _draft_pages(samples: list[Sample], source: str, cache_dir: str | None) -> dict:
    if source == "oracle":  # ground truth as drafts: an upper bound, for analysis
        return {s.name: s.page for s in samples if s.page is not None}
    from treedec.ocr.cache import draft_pages

    return draft_pages([s for s in samples if s.image is not None], cache_dir)


class TwoStages:
    """The `prepare` step: draft every page (pipeline OCR), then refine each draft region by
    decoding its crop with the target model (stage 1)."""

    def __init__(self, tok: Tokenizer, drafter: PageDraftDrafter, source: str, stage1: bool, cache_dir: str | None,
                 matcher: NgramMatcher, adaptive: bool = False, stage2_drafts: str = "both", snap: bool = True):
        self.tok, self.drafter, self.source, self.stage1, self.cache_dir = tok, drafter, source, stage1, cache_dir
        self.matcher, self.adaptive, self.stage2_drafts, self.snap = matcher, adaptive, stage2_drafts, snap

    def __call__(self, vlm, samples: list[Sample], engine_cfg, progress: bool = True) -> dict[str, dict]:
        from treedec.runner import parse_pages

        grids = model_grids(vlm, samples, self.snap)
        drafted = pages = model_drafts(samples, self.source, self.cache_dir, grids)
        figures = {name: {"draft_source": self.source, "stage1_steps": 0, "stage1_crops": 0} for name in pages}
        if self.stage1:
            pages = {n: copy.deepcopy(p) for n, p in pages.items()}
            jobs = []  # (page name, its draft block, the block's crop)
            for s in samples:
                page = pages.get(s.name)
                if page is None or s.image is None:
                    continue
                grid = grids.get(s.name)
                for k, b in enumerate(page.reading_order()):
                    if b.category in CROP_CATEGORIES and b.content:
                        jobs.append((s.name, b, Sample(f"{s.name}#{k}", None, stage1_crop(s.image, b.bbox, grid))))
            seq = SequenceDrafter(self.matcher)
            seq.seqs = {c.name: [self.tok.encode(b.content) + [self.tok.eos_id]] for _, b, c in jobs}
            crop_strategy = Strategy("hsd_stage1", "crop", self.tok, flat_target,
                                     drafter=AdaptiveLength(seq, self.matcher.max_depth) if self.adaptive else seq)
            records = parse_pages(vlm, crop_strategy, [c for _, _, c in jobs], engine_cfg, progress, warmup=False).records
            for (name, block, _), rec in zip(jobs, records):
                block.content = rec.text[: -len(EOS)] if rec.text.endswith(EOS) else rec.text
                f = figures[name]
                f["stage1_steps"] = max(f["stage1_steps"], rec.steps)
                f["stage1_crops"] += 1
            if self.stage2_drafts == "both":
                pages = {n: [p, drafted[n]] for n, p in pages.items()}
        self.drafter.pages, self.drafter._seqs, self.drafter.grids = pages, {}, grids
        return figures


def model_drafts(samples: list[Sample], source: str, cache_dir: str | None, grids: dict[str, int]) -> dict:
    """Every sample's draft page (`_draft_pages`); a pipeline draft's boxes moved onto the
    model's patch grid of its page, where `grids` (`model_grids`) has one."""
    pages = _draft_pages(samples, source, cache_dir)
    if source == "pipeline":
        pages = {n: on_grid(p, grids[n]) if n in grids else p for n, p in pages.items()}
    return pages


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


def _hsd(tokenizer: Tokenizer, name: str, base: str, drafts: str, stage1: bool, cache_dir: str | None, w_min: int,
         w_max: int, max_depth: int, max_nodes: int, relaxed_threshold: float | None, draft_len: str,
         stage2_drafts: str, fuzzy: int, snap: bool, layout: str = "ngram") -> Strategy:
    if drafts not in ("pipeline", "oracle"):
        raise UserError(f"strategy.drafts must be pipeline or oracle, got {drafts!r}")
    if draft_len not in ("fixed", "adaptive"):
        raise UserError(f"strategy.draft_len must be fixed or adaptive, got {draft_len!r}")
    if stage2_drafts not in ("stage1", "both"):
        raise UserError(f"strategy.stage2_drafts must be stage1 or both, got {stage2_drafts!r}")
    if relaxed_threshold is not None and not 0 < relaxed_threshold <= 1:
        raise UserError(f"strategy.relaxed_threshold must be in (0, 1] or null, got {relaxed_threshold}")
    if fuzzy != 0 and fuzzy < 2:
        raise UserError(f"strategy.fuzzy must be 0 (off) or a window of at least 2 tokens, got {fuzzy}")
    if layout not in ("ngram", "lines"):
        raise UserError(f"strategy.layout must be ngram or lines, got {layout!r}")
    matcher = NgramMatcher(w_min, w_max, max_depth, max_nodes, fuzzy)
    if base == "sequential":
        strategy = Strategy(name, "flat", tokenizer, flat_target)
    else:
        strategy = Strategy(name, "tree", tokenizer, tree_target, layout_fork)
    pages = PageDraftDrafter(tokenizer, strategy.mode, matcher, layout=layout)
    adaptive = draft_len == "adaptive"
    strategy.drafter = AdaptiveLength(pages, max_depth) if adaptive else pages
    strategy.prepare = TwoStages(tokenizer, pages, drafts, stage1, cache_dir, matcher, adaptive, stage2_drafts, snap)
    if relaxed_threshold is not None:  # lossy: pages may differ from the base strategy's
        strategy.acceptor = relaxed(relaxed_threshold)
        strategy.name += "_relaxed"
    return strategy


@STRATEGIES.register("hsd")
def hsd(tokenizer: Tokenizer, drafts: str = "pipeline", stage1: bool = True, cache_dir: str | None = None,
        w_min: int = 3, w_max: int = 10, max_depth: int = 15, max_nodes: int = 128,
        relaxed_threshold: float | None = None, draft_len: str = "adaptive", stage2_drafts: str = "both",
        fuzzy: int = 4, snap: bool = True, layout: str = "lines") -> Strategy:
    """HSD: sequential decoding verified against pipeline drafts (as published with
    stage2_drafts=stage1, fuzzy=0, layout=ngram, snap=false)."""
    return _hsd(tokenizer, "hsd", "sequential", drafts, stage1, cache_dir, w_min, w_max, max_depth, max_nodes,
                relaxed_threshold, draft_len, stage2_drafts, fuzzy, snap, layout)


@STRATEGIES.register("padoc_hsd")
def padoc_hsd(tokenizer: Tokenizer, drafts: str = "pipeline", stage1: bool = True, cache_dir: str | None = None,
              w_min: int = 3, w_max: int = 10, max_depth: int = 15, max_nodes: int = 128,
              relaxed_threshold: float | None = None, draft_len: str = "fixed",
              stage2_drafts: str = "both", fuzzy: int = 4, snap: bool = True, layout: str = "lines") -> Strategy:
    """The composition nobody published: PaDoc's branches, each speculated from its region's draft."""
    return _hsd(tokenizer, "padoc_hsd", "padoc", drafts, stage1, cache_dir, w_min, w_max, max_depth, max_nodes,
                relaxed_threshold, draft_len, stage2_drafts, fuzzy, snap, layout)
