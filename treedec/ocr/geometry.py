"""Line geometry of a page: boxes, OCR lines and regions, rows of lines, inked runs, and a
line the detector ran across a column gutter split there."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Box = tuple[float, float, float, float]


@dataclass
class Line:
    box: Box
    text: str
    score: float
    xs: list[float] | None = None  # x centre of each character of `text` (spaces too), when known


@dataclass
class Region:
    category: str
    box: Box
    score: float
    source: str  # layout | ruled | lines
    lines: list[Line] = field(default_factory=list)
    content: str = ""
    grid: Any = None  # a ruled table's parsed grid


def area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def overlap_area(a: Box, b: Box) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def x_overlap(a: Box, b: Box) -> float:
    return min(a[2], b[2]) - max(a[0], b[0])


def y_overlap(a: Box, b: Box) -> float:
    return min(a[3], b[3]) - max(a[1], b[1])


def center(b: Box) -> tuple[float, float]:
    return ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)


def point_in(point: tuple[float, float], b: Box) -> bool:
    return b[0] <= point[0] <= b[2] and b[1] <= point[1] <= b[3]


def rows_of(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into rows (vertical overlap over half the shorter of the line and the
    row's first line), top to bottom, each row left to right. A word without ascenders
    starts lower than its neighbours; it still joins their row wherever it sits in x."""
    rows: list[list[Line]] = []
    spans: list[list[float]] = []
    for ln in sorted(lines, key=lambda l: (l.box[1], l.box[0])):
        h = ln.box[3] - ln.box[1]
        for row, span in zip(rows, spans):
            over = min(ln.box[3], span[1]) - max(ln.box[1], span[0])
            if over > 0.5 * min(h, span[1] - span[0]):
                row.append(ln)
                break
        else:
            rows.append([ln])
            spans.append([ln.box[1], ln.box[3]])
    for row in rows:
        row.sort(key=lambda l: l.box[0])
    rows.sort(key=lambda r: (min(l.box[1] for l in r), r[0].box[0]))
    return rows


def spaces_between(xs: list[float | None]) -> list[float]:
    """Positions with the unknown ones (spaces) halfway between their known neighbours (at
    the one neighbour at an end)."""
    known = [(i, x) for i, x in enumerate(xs) if x is not None]
    out = []
    for i, x in enumerate(xs):
        if x is None:
            left = [v for j, v in known if j < i]
            right = [v for j, v in known if j > i]
            x = (left[-1] + right[0]) / 2 if left and right else (left or right or [0.0])[-1]
        out.append(float(x))
    return out


def glyph_centres(box: Box, ink_page: np.ndarray) -> list[float] | None:
    """x centres of the inked runs (glyphs) inside `box`; None for an empty box."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    strip = ink_page[max(0, y1):max(0, y2), max(0, x1):max(0, x2)]
    if strip.size == 0:
        return None
    return [x1 + (a + b + 1) / 2 for a, b in ink_runs(strip.any(axis=0))]


def ink_runs(cols: np.ndarray, min_blank: int = 2) -> list[tuple[int, int]]:
    """Runs of inked columns (first, last); a blank of `min_blank` columns or more ends one."""
    runs, start, blank, end = [], None, 0, 0
    for i, on in enumerate(cols):
        if on:
            if start is None:
                start = i
            blank, end = 0, i
        elif start is not None:
            blank += 1
            if blank >= min_blank:
                runs.append((start, end))
                start = None
    if start is not None:
        runs.append((start, end))
    return runs


def split_at_gutters(line: Line, ink_page: np.ndarray, min_run: float = 0.0) -> list[Line]:
    """A detected line that jumps a column gutter (two columns read as one line) split at
    every blank run wider than 0.8 line heights (and than `min_run` pixels: on a
    fixed-pitch page a word space is a whole blank cell) inside it that stays blank from a
    line height above the line to one below; the line's character positions (`xs`) say
    which piece each character is in (a line without them stays whole)."""
    x1, y1, x2, y2 = (round(v) for v in line.box)
    h = y2 - y1
    strip = ink_page[max(0, y1):max(0, y2), max(0, x1):max(0, x2)]
    if strip.size == 0 or line.xs is None:
        return [line]
    ink = strip.any(axis=0)
    cols = np.flatnonzero(ink)
    if cols.size == 0:
        return [line]
    cuts, run = [], 0
    H = ink_page.shape[0]
    for i in range(int(cols[0]), int(cols[-1]) + 1):
        if ink[i]:
            if run > max(0.8 * h, min_run):  # a gutter stays blank a line above and below (a wide space does not)
                lo, hi = x1 + i - run + 1, x1 + i - 1
                around = ink_page[max(0, y1 - h):min(H, y2 + h), max(0, lo):max(0, hi)]
                if around.size and around.mean() < 0.002:
                    cuts.append(x1 + i - run / 2)
            run = 0
        else:
            run += 1
    if not cuts:
        return [line]
    edges = [float(line.box[0])] + cuts + [float(line.box[2])]
    texts = ["" for _ in range(len(edges) - 1)]
    xss: list[list[float]] = [[] for _ in texts]
    for c, x in zip(line.text, line.xs):
        k = max(0, min(len(texts) - 1, int(np.searchsorted(cuts, x))))
        texts[k] += c
        xss[k].append(x)
    if any(not t.strip() for t in texts):
        return [line]
    pieces_text = [(t.strip(), xs[len(t) - len(t.lstrip()):len(t.rstrip())]) for t, xs in zip(texts, xss)]
    out = []
    for k, (text, xs) in enumerate(pieces_text):
        lo, hi = edges[k], edges[k + 1]
        seg = np.flatnonzero(ink[max(0, int(lo) - x1):max(0, int(hi) - x1)])
        bx1 = lo + (seg[0] if seg.size else 0) if k else line.box[0]
        bx2 = lo + (seg[-1] + 1 if seg.size else hi - lo) if k < len(pieces_text) - 1 else line.box[2]
        out.append(Line((float(bx1), line.box[1], float(bx2), line.box[3]), text, line.score, xs))
    return out


def usual_gap(groups: list[list[Line]], unit: float) -> float:
    """The usual gap between consecutive lines of a paragraph, learnt from the layout
    model's text regions (`groups`: their lines): the lower quartile of the gaps between
    each line and the nearest line below it in the same region (0 without evidence)."""
    gaps = []
    for lines in groups:
        for a in lines:
            below = [b.box[1] - a.box[3] for b in lines if b is not a and x_overlap(a.box, b.box) > 0
                     and b.box[1] > a.box[1] + 0.5 * (a.box[3] - a.box[1])]
            below = [g for g in below if g <= 2 * unit]
            if below:
                gaps.append(min(below))
    return max(0.0, float(np.percentile(gaps, 25))) if gaps else 0.0


def ink_mask(gray: np.ndarray) -> np.ndarray:
    """Ink pixels: darker than the page's Otsu threshold (at most 200, so a blank page
    stays blank)."""
    import cv2

    t, _ = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    return gray < min(float(t), 200.0)
