"""Re-reading text set in wide fixed cells (the synthetic pages' monospace font, 16 px glyph
cells for the shipped model).

The detector cuts such text into single glyphs and misses some, and the recogniser,
reading a glyph alone, guesses its case and puts spaces between letters that stand apart.
When most detected pieces hold one or two characters, the pieces of a row closer than
`join_gap` line heights (no vertical rule between) are read again as one crop; inked runs
beside them that no piece covers (a missed glyph) join them; each line's character centres
come from its inked runs (or the recogniser's CTC columns); when those sit on a fixed
pitch, spaces are rebuilt from the gaps (n pitches apart: n - 1 spaces), and where nearly
every line but a block's last runs to the block's edge (text broken anywhere to fill lines)
rows join without a space unless a blank cell ends or starts them. Pages whose lines the
detector finds whole are untouched."""
from __future__ import annotations

import numpy as np

from treedec.ocr.geometry import Line, glyph_centres, ink_runs, rows_of, spaces_between, union


def column_xs(text: str, x1: float, x2: float, info) -> list[float] | None:
    """The x centre of each character of `text`, read by the recogniser from a crop spanning
    x1..x2 on the page: its characters' output columns (`info`, rapidocr's `WordInfo`: words,
    their columns, the crop's columns) placed evenly over the crop; a space halfway between its
    neighbours. None when the columns do not match the text's characters one to one or do not
    run left to right."""
    if info is None or not info.line_txt_len:
        return None
    col_w = (x2 - x1) / info.line_txt_len
    chars = [(x1 + (c + 0.5) * col_w, ch) for word, cols in zip(info.words, info.word_cols)
             for ch, c in zip(word, cols) if str(ch).strip()]
    if [c for _, c in chars] != [c for c in text if not c.isspace()]:
        return None
    it = iter(chars)
    out = spaces_between([None if c.isspace() else next(it)[0] for c in text])
    return out if all(a <= b for a, b in zip(out, out[1:])) else None


def ink_xs(line: Line, ink_page: np.ndarray) -> list[float] | None:
    """Character centres from the ink: the line's glyphs as runs of inked columns (a gap of
    two blank columns or more ends a glyph). Only when they are as many as the text's
    non-space characters -- as on a page whose wide fixed cells keep glyphs apart; letters
    that touch, as in most proportional fonts, give fewer runs and None."""
    centres = glyph_centres(line.box, ink_page)
    solid = [i for i, c in enumerate(line.text) if not c.isspace()]
    if centres is None or len(centres) != len(solid):
        return None
    xs: list[float | None] = [None] * len(line.text)
    for i, x in zip(solid, centres):
        xs[i] = x
    return spaces_between(xs)


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
        runs = [(a, b) for a, b in ink_runs(cols) if not covered[a:b + 1].any()]
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
        xs = [x for l in row for x in (glyph_centres(l.box, ink_page) or [])]
        if xs:
            xs.sort()
            out.append(Line(row[0].box, "x" * len(xs), 1.0, xs))
    return out


def ruled_between(left: Line, right: Line, rules: np.ndarray | None, h: float) -> bool:
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
            if ln.box[0] - cur[-1].box[2] <= max_gap * h and not ruled_between(cur[-1], ln, rules, h):
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
            if ln.box[0] - cur.box[2] < max_cells * pitch and not ruled_between(cur, ln, rules, h) and cur.text \
                    and ln.text:
                xs = None
                if cur.xs is not None and ln.xs is not None:
                    xs = [*cur.xs, (cur.xs[-1] + ln.xs[0]) / 2, *ln.xs]
                cur = Line(union([cur.box, ln.box]), cur.text + " " + ln.text, min(cur.score, ln.score), xs)
            else:
                out.append(cur)
                cur = ln
        out.append(cur)
    return out


def row_span(row: list[Line], pitch: float) -> tuple[float, float]:
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
        spans = [row_span(r, pitch) for r in rows]
        right = max(e for _, e in spans)
        full += [e >= right - 0.5 * pitch for _, e in spans[:-1]]
    return len(full) >= min_rows and sum(full) >= share * len(full)
