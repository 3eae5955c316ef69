"""Blocks from lines and layout regions: which lines a region holds, checks on what the
layout model said, lines no region holds grouped into blocks and named by plain rules
("Table 1..." / "Figure 1..." captions, math-looking blocks formulas, one- or two-line bold
or large blocks titles, a lone line in the top/bottom band a header/footer or page number)."""
from __future__ import annotations

import re

import numpy as np

from treedec.ocr.context import PageContext
from treedec.ocr.formulas import looks_like_formula, merge_formulas
from treedec.ocr.geometry import Box, Line, Region, area, overlap_area, rows_of, union, x_overlap, y_overlap
from treedec.ocr.text import lines_text


CAPTION = (("table_caption", re.compile(r"^\s*(table|tab\.|表)\s*[0-9IVXivx]", re.IGNORECASE)),
           ("figure_caption", re.compile(r"^\s*(figure|fig\.|图)\s*[0-9IVXivx]", re.IGNORECASE)))
NUMBER = re.compile(r"^\s*[-–—(\[]?\s*(\d{1,4}|[ivxlcdm]{1,6})\s*[-–—)\]]?\s*$", re.IGNORECASE)


def check_bands(regions: list[Region], height: int, band: float) -> list[Region]:
    """A layout header reaching below the top band of the page, or a footer above the
    bottom band, is dropped: its lines go to the line rules instead."""
    keep = []
    for r in regions:
        if r.source == "layout" and ((r.category == "header" and r.box[3] > band)
                                     or (r.category == "footer" and r.box[1] < height - band)):
            continue
        keep.append(r)
    return keep


def check_figures(regions: list[Region], lines: list[Line], shape) -> list[Region]:
    """A figure that is mostly text (its lines cover over 15% of it) or covers over 60%
    of the page is not kept: its lines go to the other regions and the line rules."""
    H, W = shape
    keep = []
    for r in regions:
        if r.category == "figure":
            text = sum(overlap_area(l.box, r.box) for l in lines)
            if text > 0.15 * area(r.box) or area(r.box) > 0.6 * W * H:
                continue
        keep.append(r)
    return keep


def assign_lines(lines: list[Line], regions: list[Region]) -> list[Line]:
    """Each line to the smallest region holding at least half of it; the lines no
    region holds."""
    free = []
    for ln in lines:
        la = max(area(ln.box), 1e-6)
        best, key = None, None
        for r in regions:
            frac = overlap_area(ln.box, r.box) / la
            if frac >= 0.5 and (key is None or (area(r.box), -frac) < key):
                best, key = r, (area(r.box), -frac)
        if best is None:
            free.append(ln)
        else:
            best.lines.append(ln)
    return free


def split_regions(regions: list[Region], page: PageContext, line_gap: float) -> list[Region]:
    """A layout text region whose lines fall into separate blocks by the line rules
    (a blank line or more between them) is those blocks: the layout model often
    merges neighbouring paragraphs."""
    out = []
    for r in regions:
        if r.source == "layout" and r.category in ("text_block", "reference") and len(r.lines) > 1:
            others = [o for o in regions if o is not r]
            parts = line_blocks(r.lines, others, page, line_gap)
            if len(parts) > 1:
                out += parts
                continue
        out.append(r)
    return out


def line_blocks(lines: list[Line], regions: list[Region], page: PageContext, line_gap: float) -> list[Region]:
    """Lines no region holds, grouped into blocks and named by plain rules. Fragments
    (lines under 0.75 of the usual height: super/subscripts, stray marks) join the
    nearest block within half a line height. `line_gap`: how many line heights beyond
    the usual leading a block may jump."""
    small = [l for l in lines if l.box[3] - l.box[1] < 0.75 * page.unit]
    blocks = stack_lines([l for l in lines if l not in small], regions, page, line_gap)
    attach_fragments(small, blocks, page.unit)
    out = [Region(block_category(blk, small, page), union([l.box for l in blk]),
                  float(np.mean([l.score for l in blk])), "lines", lines=list(blk)) for blk in blocks]
    return merge_formulas(out, page.unit)


def stack_lines(lines: list[Line], regions: list[Region], page: PageContext, line_gap: float) -> list[list[Line]]:
    """Full-height lines, top to bottom, each appended to the latest block it continues
    (`continues`), else starting a block of its own."""
    blocks: list[list[Line]] = []
    for ln in sorted(lines, key=lambda l: (l.box[1], l.box[0])):
        blk = next((b for b in reversed(blocks) if continues(b, ln, regions, page, line_gap)), None)
        if blk is None:
            blocks.append([ln])
        else:
            blk.append(ln)
    return blocks


def continues(blk: list[Line], ln: Line, regions: list[Region], page: PageContext, line_gap: float) -> bool:
    """`ln` is the next line of `blk`: below its last line within the usual leading plus
    `line_gap` line heights, overlapping it in x, of a like height, not beside it, and the
    block grown by it reaches into no region."""
    last = blk[-1].box
    lh, bh = ln.box[3] - ln.box[1], last[3] - last[1]
    gap = ln.box[1] - last[3]
    if not (-0.5 * lh <= gap <= page.leading + line_gap * page.unit and x_overlap(ln.box, union([l.box for l in blk])) > 0):
        return False
    if max(lh, bh) > 1.5 * min(lh, bh) or y_overlap(ln.box, last) > 0.5 * min(lh, bh):
        return False  # another size, or side by side: not the next line of this block
    merged = union([l.box for l in blk] + [ln.box])
    return not any(overlap_area(merged, r.box) > 0.1 * area(r.box) for r in regions)


def attach_fragments(small: list[Line], blocks: list[list[Line]], unit: float) -> None:
    """Each fragment joins the nearest block within half a line height, else is a block."""
    for ln in sorted(small, key=lambda l: (l.box[1], l.box[0])):
        best, dist = None, 0.5 * unit
        for blk in blocks:
            b = union([l.box for l in blk])
            d = max(b[0] - ln.box[2], ln.box[0] - b[2], b[1] - ln.box[3], ln.box[1] - b[3], 0.0)
            if d <= dist:
                best, dist = blk, d
        if best is None:
            blocks.append([ln])
        else:
            best.append(ln)


def block_category(blk: list[Line], small: list[Line], page: PageContext) -> str:
    """A line block's category by plain rules: a caption by its words, a formula by its look,
    a title when one or two lines, bold or large, not a sentence; else text."""
    text = lines_text(blk)
    for name, pat in CAPTION:
        if pat.match(text):
            return name
    main = [l for l in blk if l not in small] or blk
    if len(main) <= 3 and looks_like_formula(text):
        return "equation_isolated"
    height = float(np.mean([l.box[3] - l.box[1] for l in main]))
    stroke = float(np.mean([stroke_width(page.ink, l.box) for l in main]))
    if (len(main) <= 2 and height >= 0.75 * page.unit and not text.endswith(".")
            and len(text.replace(" ", "")) >= 3 and not NUMBER.match(text)
            and (height >= 1.3 * page.unit or (page.med_stroke > 0 and stroke >= 1.15 * page.med_stroke))):
        return "title"
    return "text_block"


def stroke_width(ink_page: np.ndarray, box: Box) -> float:
    """Mean horizontal run of ink pixels in the box: about the stroke width (bold > regular)."""
    x1, y1, x2, y2 = (round(v) for v in box)
    ink = ink_page[max(0, y1):max(0, y2), max(0, x1):max(0, x2)]
    if not ink.any():
        return 0.0
    starts = (np.diff(np.pad(ink.astype(np.int8), ((0, 0), (1, 0))), axis=1) == 1).sum()
    return float(ink.sum() / max(int(starts), 1))


def name_furniture(regions: list[Region], height: int, band: float) -> None:
    """Line-rule blocks: one line in the top or bottom band (10% of the page or 3.5
    line heights) with nothing beyond it is a header / footer; a header or footer that
    is a number is the page number; a layout title of more than two lines is text."""
    body = [r for r in regions]
    for r in regions:
        if r.category in ("header", "footer") and NUMBER.match(r.content or ""):
            r.category = "page_number"
        if r.category == "title" and r.source == "layout" and len(rows_of(r.lines)) > 2:
            r.category = "text_block"
        if r.source != "lines" or len(r.lines) != 1 or r.category not in ("text_block",):
            continue
        top, bottom = r.box[1], r.box[3]
        if bottom <= band and not any(o is not r and o.box[3] <= top for o in body):
            r.category = "header"
        elif top >= height - band and not any(o is not r and o.box[1] >= bottom for o in body):
            r.category = "page_number" if NUMBER.match(r.content) else "footer"
