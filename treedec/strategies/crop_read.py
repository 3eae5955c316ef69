"""What a region crop is read as (prompt mode `crop`: HSD's stage 1, `crops`' second stage):
its target, the region's content then `<eos>` (what the crop task trains), and its ground
truth, the region of the page's ground truth that the crop shows (the content block its box
overlaps most), which a forced model reads it as (`treedec.models.forced`)."""
from __future__ import annotations

from treedec.formats import Format
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.tokenizer import Tokenizer
from treedec.training.packing import flat_graph

UNREAD = frozenset({"figure", "text_mask", "table_mask"})  # regions without content: no crop is read


def crop_target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
    """A crop's ground truth (`region_truth`, one block or none) as the crop reads it, in `fmt`
    (`Format.crop_text`; None: the content as it is), then `<eos>`."""
    text = (fmt.crop_text(page.blocks[0]) if fmt else page.blocks[0].content) if page.blocks else ""
    return flat_graph(prompt, tok.encode(text) + [tok.eos_id])


def region_truth(page: Page | None, bbox) -> Page | None:
    """The block of `page` (a ground truth, or None) that a crop of `bbox` shows: the content
    block of largest overlap with the box, alone on a page; no block where none overlaps."""
    if page is None:
        return None
    x1, y1, x2, y2 = bbox

    def overlap(b) -> float:
        w = min(x2, b.bbox[2]) - max(x1, b.bbox[0])
        h = min(y2, b.bbox[3]) - max(y1, b.bbox[1])
        if w <= 0 or h <= 0:
            return 0.0
        inter = w * h
        area = (x2 - x1) * (y2 - y1) + (b.bbox[2] - b.bbox[0]) * (b.bbox[3] - b.bbox[1]) - inter
        return inter / area if area > 0 else 0.0

    blocks = [b for b in page.reading_order() if b.category not in UNREAD]
    best = max(blocks, key=overlap, default=None)
    return Page(page.width, page.height, [best] if best is not None and overlap(best) > 0 else [])
