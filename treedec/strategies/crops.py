"""Crops: the decoupled two-stage parse of MinerU2.5 and PaddleOCR-VL, built from treedec's
parts, the baseline users pick today instead of a tree decode. This file is `crops` in
treedec's format; in any other format its stages are the format's
(`treedec.strategies.crops_regions`: the format's layout pass or a detector's layout, its crop
prompts, the page built as a `Page`).

Stage 1 is the model's layout pass on the whole page: PaDoc's layout stream (prompt mode
`tree`) decoded alone, no branch forked, so its tokens are those of `padoc`'s layout stream.
Stage 2 (`Strategy.after`, a stage of its own: `treedec.run.stages`): every region of that layout
whose category holds content is cut from the page (`stage1_crop`, HSD's stage-1 crop: on the
model's patch grid where it has one) and read in prompt mode `crop`; the crops of all pages
run as one batch (one `runtime.run`, on either runtime). Each reading is spliced into the
page as a branch of its region's `<FORK>`, so the page reads as any tree decode's (flat
text, streams, timeline), and its critical path is the layout's steps plus its longest
crop's (the crops of a page run in parallel). A page's latency runs to its last crop's
reading; the run's `forward_passes` counts the layout run's passes and the crops' run's.
"""
from __future__ import annotations

from dataclasses import replace

from treedec.data.sample import Sample
from treedec.engine.page_decoding import PageDecoding
from treedec.formats import Format
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.formats.contract import BLOCK, CHILD, EOS, block_layout, parse_flat
from treedec.records import page_record
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.crop_read import UNREAD, crop_target, region_truth
from treedec.strategies.crops_regions import add_reads, format_crops
from treedec.strategies.hsd_stage1 import model_grid, stage1_crop
from treedec.tokenizer import Tokenizer


def crops_target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
    """The ground truth as the two stages decode it: the layout stream (`<FORK>` per region),
    then each region's content as a branch that starts after the whole layout, so the
    critical path is l(B) + max_k l(Y_k) (oracle depth). Training on it trains the layout
    pass; reading crops is the crop task every training run has (`crop_examples`)."""
    g = DecodingGraph()
    root = g.root(prompt)
    blocks = page.reading_order()
    g.append(root.id, [t for b in blocks for t in tok.encode(block_layout(b, page.width, page.height)) + [tok.fork_id]]
             + [tok.eos_id])
    g.finish(root.id)
    for k, b in enumerate(blocks):
        if b.category not in UNREAD:
            child = g.fork(root.id, at=len(root.tokens), first=[tok.child_id], label=f"crop {k + 1}")
            g.append(child.id, tok.encode(b.content) + [tok.eos_id])
            g.finish(child.id)
    return g


class ReadCrops:
    """The stage after the layout pass in treedec's format (`Strategy.after`,
    `treedec.strategies.stages.AfterDecoding`): which regions of a decoded page are read from
    their crops, by what (`reader`), and how the readings go back into the page (`record`: spliced
    as the branches of their `<FORK>`s)."""

    decodes_pages = True
    cache_dir = None

    def __init__(self, tok: Tokenizer):
        self.tok = tok
        self._reader = Strategy("crops_read", "crop", tok, crop_target)

    def prepare(self, vlm, samples, cache_dir, progress: bool) -> None:
        return None

    def layout_drafts(self, known, sample) -> list[list[int]]:
        return []

    def reader(self, vlm) -> Strategy:
        return self._reader

    def regions(self, vlm, r: PageDecoding, known=None) -> list[tuple[int, Sample, list[list[int]]]]:
        """(index of the region's `<FORK>` in the layout stream, the region's crop, no drafts) for
        each region of the decoded layout that holds content."""
        tok, sample = self.tok, r.sample
        image = sample.image
        grid = model_grid(vlm, image)
        root = r.graph[0]
        out, head = [], []
        for i in range(root.prompt_len, len(root.tokens)):
            t = root.tokens[i]
            if t == tok.block_id:
                head = []
            elif t != tok.fork_id:
                head.append(t)
            else:
                block = parse_flat(BLOCK + tok.decode(head) + CHILD + EOS, image.width, image.height).page.blocks[0]
                if block.category not in UNREAD:
                    out.append((i, Sample(f"{sample.name}#{len(out)}", region_truth(sample.page, block.bbox),
                                          stage1_crop(image, block.bbox, grid)), []))
        return out

    def record(self, r: PageDecoding, crops: list[tuple[int, PageDecoding]], strategy: Strategy, known=None):
        splice(r, crops, self.tok)
        return page_record(r, strategy)


def splice(r: PageDecoding, crops: list[tuple[int, PageDecoding]], tok: Tokenizer) -> None:
    """Each crop's reading into the page's graph as a branch of its region's `<FORK>` (a
    region left unread gets an empty one); steps: the layout's plus the longest crop's, the
    crops' steps appended to the timeline (each branch on its own row), their flags kept."""
    g, readings = r.graph, dict(crops)
    forks = [i for i in range(g[0].prompt_len, len(g[0].tokens)) if g[0].tokens[i] == tok.fork_id]
    rows: list[tuple[int, PageDecoding]] = []
    for k, at in enumerate(forks):
        child = g.fork(0, at=at, first=[tok.child_id], label=f"crop {k + 1}")
        c = readings.get(at)
        if c is not None:
            crop_root = c.graph[0]
            g.append(child.id, crop_root.tokens[crop_root.prompt_len:])
            rows.append((child.id, c))
            r.flags += [f"crop {k + 1}: {f}" for f in c.flags]
        g.finish(child.id)
    add_reads(r, rows)


def in_format(strategy: Strategy, fmt: Format) -> Strategy:
    """`crops` speaking `fmt`: treedec's own as above, any other's stages the format's
    (`treedec.strategies.crops_regions`)."""
    if fmt.name == "treedec":
        return replace(strategy, format=fmt)
    return format_crops(strategy.name, strategy.tokenizer, fmt)


@STRATEGIES.register("crops")
def crops(tokenizer: Tokenizer) -> Strategy:
    """MinerU2.5 / PaddleOCR-VL's two-stage parse: the layout pass on the page (or, in a format
    without one, a detector's layout), then every region of every page read from its own crop,
    the crops in one batch."""
    return Strategy("crops", "tree", tokenizer, crops_target, after=ReadCrops(tokenizer), respeak=in_format)
