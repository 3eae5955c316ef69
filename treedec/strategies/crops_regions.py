"""`crops` in any format but treedec's own (whose layout stream and token splice stay in
`treedec.strategies.crops`): the page's regions come from the format's layout pass where it has
one (`Format.layout_mode`: hpd's layout stream, MinerU2.5's `Layout Detection:`, dots.ocr's
layout-only prompt), read back by the format (`Format.read_layout`), else from a detector: the
pipeline drafter's layout (PaddleOCR-VL's PP-DocLayoutV2 stand-in; Markdown and DocTags, which
write no layout alone), or the ground truth's regions under forcing (a perfect detector). Each region holding
content is read from its crop with the format's crop prompt (per category where it has one;
a checkpoint without a crop prompt reads it with its page prompt, the crop as a small page),
and the page is built as a `Page` (the layout's blocks, each with its crop's reading: the
format's `read_crop`) and written as the format writes a page (`Format.render`): the record's
text, read back by the format.

With `drafts` (hsd in a two-stage format, `CropDrafts`), the layout pass is drafted from the
draft page's layout and each crop read from the draft region it overlaps most, written as the
format's crop read writes it (`Format.crop_text`; with the page prompt, as the format writes a
page holding that block alone): HSD's stage 1, the page's readings being the result."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from treedec.data.sample import Sample
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import SequenceDrafter
from treedec.engine.draft_length import AdaptiveLength
from treedec.engine.page_decoding import PageDecoding
from treedec.errors import UserError
from treedec.formats import Format
from treedec.graph import DecodingGraph
from treedec.ocr.drafters import Drafters
from treedec.page import Block, Page
from treedec.records import PageRecord, RunResult, root_io, sample_flags, sample_size, unreadable
from treedec.strategies.base import Strategy
from treedec.strategies.crop_read import UNREAD, crop_target, region_truth
from treedec.strategies.draft_pages import draft_pages
from treedec.strategies.hsd_stage1 import crop_draft, model_grid, stage1_crop, stage1_mode
from treedec.strategies.sequential import flat_target
from treedec.tokenizer import Tokenizer


@dataclass
class CropDrafts:
    """Where hsd's drafts come from in a two-stage format (`strategy.drafts`, `cache_dir`, `ocr`:
    `treedec.strategies.hsd.HSDOptions`) and how they are matched."""
    source: str
    cache_dir: str | None
    ocr: Any
    matcher: NgramMatcher
    adaptive: bool

    def drafter(self):
        """A draft source of fixed sequences per sample (the layout pass's, the crops')."""
        drafts = SequenceDrafter(self.matcher)
        return AdaptiveLength(drafts, self.matcher.max_depth) if self.adaptive else drafts


@dataclass
class Known:
    """What is known of a run's pages before and between its model runs, by page name: their
    layouts (a detector's, or read from the layout pass) in the image's pixels, what reading a
    layout repaired, and the draft pages."""
    layouts: dict[str, Page] = field(default_factory=dict)
    repairs: dict[str, list[str]] = field(default_factory=dict)
    drafts: dict[str, Page] = field(default_factory=dict)
    mode: str = "crop"  # the prompt mode the crops are read in (`hsd_stage1.stage1_mode`)


def regions_target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
    """The ground truth as `crops` decodes it in `fmt`: its layout as the format's layout pass
    writes it (`Format.render_layout`; nothing where a detector gives the layout), then each
    region's crop read (`Format.crop_text`) as a branch after the whole layout, so the critical
    path is the layout's plus the longest read's (oracle depth). A forced layout pass is forced to
    its root; the branches are never decoded as such (a crop is read alone, `crop_read`)."""
    g = DecodingGraph()
    root = g.root(prompt)
    if fmt.layout_mode:
        g.append(root.id, fmt.encode(tok, fmt.render_layout(page)))
    g.finish(root.id)
    for k, b in enumerate(page.reading_order()):
        if b.category not in UNREAD:
            child = g.fork(root.id, at=len(root.tokens), label=f"crop {k + 1}")
            g.append(child.id, tok.encode(fmt.crop_text(b)) + [tok.eos_id])
            g.finish(child.id)
    return g


def format_crops(name: str, tok: Tokenizer, fmt: Format, drafts: CropDrafts | None = None) -> Strategy:
    """`crops` speaking `fmt` (see the module); with `drafts`, speculated (hsd)."""
    # no layout pass: the only prompt it asks is a crop's (or, where the format names none, the page's)
    mode = fmt.layout_mode or ("crop" if fmt.has_prompt("crop") else "flat")
    return Strategy(name, mode, tok, regions_target,
                    drafter=drafts.drafter() if drafts and fmt.layout_mode else None,
                    after=ReadRegions(tok, fmt, drafts), format=fmt, needs=("block_text",) if drafts else ())


def in_pixels(page: Page, width: int, height: int) -> Page:
    """A copy of `page` with its boxes scaled to a `width` x `height` page."""
    out = copy.deepcopy(page)
    fx, fy = width / max(1, page.width), height / max(1, page.height)
    out.width, out.height = width, height
    for b in out.blocks:
        b.bbox = (b.bbox[0] * fx, b.bbox[1] * fy, b.bbox[2] * fx, b.bbox[3] * fy)
    return out


def add_reads(r: PageDecoding, rows: list[tuple[int, PageDecoding]]) -> None:
    """The crops' reads (`(stream id in the page's graph, its decoding)`) on the page's critical
    path: the layout's steps plus the longest crop's, each crop's steps on its row of the
    timeline, their drafts and flags counted."""
    longest = max((c.steps for _, c in rows), default=0)
    r.timeline += [[sid for sid, c in rows if c.steps > j] for j in range(longest)]
    r.steps += longest
    for _, c in rows:
        r.drafted, r.accepted = r.drafted + c.drafted, r.accepted + c.accepted


class ReadRegions:
    """`crops`' stages in a format other than treedec's (`treedec.strategies.stages.AfterDecoding`)."""

    def __init__(self, tok: Tokenizer, fmt: Format, drafts: CropDrafts | None = None):
        self.tok, self.fmt, self.drafts = tok, fmt, drafts
        self.decodes_pages = fmt.layout_mode is not None
        self.cache_dir = drafts.cache_dir if drafts else None
        self._readers: dict[str, Strategy] = {}
        self.drafters = Drafters()  # its pipeline drafter: models load once for its runs

    def prepare(self, vlm, samples, cache_dir: str | None, progress: bool) -> Known:
        """The draft pages (with `drafts`) and, without a layout pass, every page's layout: the
        ground truth's regions under forcing, else the pipeline drafter's (no model runs)."""
        seen = [s for s in samples if s.image is not None]
        known = Known()
        if self.drafts:
            sizes = {s.name: s.image.size for s in seen}
            known.drafts = {n: in_pixels(p, *sizes[n]) for n, p in
                            draft_pages(seen, self.drafts.source, cache_dir, self.drafts.ocr, progress,
                                        self.drafters).items()}
        if self.decodes_pages:
            return known
        if vlm.forced:  # a perfect detector
            for s in seen:
                if s.page is None:
                    raise UserError(f"model=forced needs every page's ground truth; {s.name!r} has none")
                known.layouts[s.name] = in_pixels(s.page, *s.image.size)
        elif self.drafts and self.drafts.source == "pipeline":
            known.layouts = dict(known.drafts)
        else:
            known.layouts = draft_pages(seen, "pipeline", cache_dir, None, progress, self.drafters)
        return known

    def layout_drafts(self, known: Known, sample) -> list[list[int]]:
        """The page's layout pass drafted from its draft page's layout ([]: no drafts)."""
        draft = known.drafts.get(sample.name)
        if draft is None or not self.decodes_pages:
            return []
        return [self.fmt.encode(self.tok, self.fmt.render_layout(draft))]

    def detected(self, strategy: Strategy, samples) -> RunResult:
        """Without a layout pass: every page as decoded so far (nothing: its graph the empty root
        its crops' reads join)."""
        records = []
        for s in samples:
            if s.image is None:
                records.append(unreadable(s))
                continue
            r = PageDecoding(name=s.name, sample=s)
            r.graph.root([])
            records.append(PageRecord(s.name, Page(*sample_size(s)), "", decoding=r, gt=s.page))
        return RunResult(strategy.name, records, 0.0, 0)

    def reader(self, vlm) -> Strategy:
        """What reads a crop: the format's crop prompt, or (a checkpoint without one) its page prompt."""
        mode = stage1_mode(vlm)
        if mode not in self._readers:
            self._readers[mode] = Strategy("crops_read", mode, self.tok, crop_target if mode == "crop" else flat_target,
                                           drafter=self.drafts.drafter() if self.drafts else None, format=self.fmt)
        return self._readers[mode]

    def regions(self, vlm, r: PageDecoding, known: Known) -> list[tuple[int, Sample, list[list[int]]]]:
        """(index in the layout's reading order, the region's crop, its drafts) for each region of
        the page's layout that holds content."""
        s = r.sample
        if self.decodes_pages:
            root = r.graph[0]
            ids = [t for t in root.tokens[root.prompt_len:] if t not in self.tok.eos_ids]
            parsed = self.fmt.read_layout(self.tok.decode(ids), *s.image.size)
            known.layouts[s.name], known.repairs[s.name] = parsed.page, parsed.repairs
        known.mode = stage1_mode(vlm)
        layout, grid, mode = known.layouts.get(s.name), model_grid(vlm, s.image), known.mode
        truth = s.page and in_pixels(s.page, *s.image.size)  # the ground truth in the crops' pixels
        out = []
        for k, b in enumerate(layout.reading_order() if layout else []):
            if b.category not in UNREAD:
                crop = Sample(f"{s.name}#{k}", region_truth(truth, b.bbox),
                              stage1_crop(s.image, b.bbox, grid), category=b.category)
                out.append((k, crop, self._crop_drafts(known.drafts.get(s.name), b, mode)))
        return out

    def _crop_drafts(self, draft: Page | None, region: Block, mode: str) -> list[list[int]]:
        best = region_truth(draft, region.bbox) if draft is not None else None
        if best is None or not best.blocks:
            return []
        return [crop_draft(self.tok, self.fmt, best.blocks[0], mode)]

    def reading(self, c: PageDecoding, category: str, mode: str) -> str:
        """A region's content from its crop's read (`Format.read_crop`; read with the page prompt:
        the content of the blocks it wrote)."""
        root = c.graph[0]
        ids = root.tokens[root.prompt_len:]
        while ids and ids[-1] in self.tok.eos_ids:
            ids = ids[:-1]
        text = self.tok.decode(ids)
        if mode == "flat":
            return "\n".join(b.content for b in self.fmt.parse(text).page.reading_order() if b.content)
        return self.fmt.read_crop(text, category)

    def record(self, r: PageDecoding, reads: list[tuple[int, PageDecoding]], strategy: Strategy,
               known: Known) -> PageRecord:
        """The page built from its layout and its crops' readings, written as the format writes a
        page; the reads join its graph (a stream each, after the layout) and its critical path."""
        s, g = r.sample, r.graph
        layout = known.layouts.get(s.name) or Page(*s.image.size)
        readings, rows, flags = dict(reads), [], []
        blocks = []
        for k, b in enumerate(layout.reading_order()):
            c = readings.get(k)
            blocks.append(Block(b.category, b.bbox, self.reading(c, b.category, known.mode) if c is not None else "", order=k))
            if c is not None:
                child = g.fork(0, at=len(g[0].tokens), label=f"crop {k + 1}")
                g.append(child.id, c.graph[0].tokens[c.graph[0].prompt_len:])
                g.finish(child.id)
                rows.append((child.id, c))
                flags += [f"crop {k + 1}: {f}" for f in c.flags]
        add_reads(r, rows)
        width, height = sample_size(s)
        text = self.fmt.render(in_pixels(Page(layout.width, layout.height, blocks), width, height))
        parsed = self.fmt.parse(text, width, height, image_path=s.name)
        repairs = [f"layout: {x}" for x in known.repairs.get(s.name, [])] + parsed.repairs
        return PageRecord(s.name, parsed.page, text, decoding=r, gt=s.page,
                          flags=sample_flags(s) + list(r.flags) + flags + [f"repaired: {x}" for x in repairs],
                          kept=root_io(r, strategy))

