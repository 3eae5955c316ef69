"""A block's text from its OCR lines: rows top to bottom, joined as prose is (hyphenated
words rejoined, CJK without spaces), or run on where a fixed-pitch page hard-wraps."""
from __future__ import annotations

import re

from treedec.ocr.fixed_pitch import row_span
from treedec.ocr.geometry import Line, rows_of


_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def join_text(a: str, b: str) -> str:
    if not a:
        return b
    if not b:
        return a
    if _CJK.match(a[-1]) and _CJK.match(b[0]):
        return a + b
    if a.endswith("-") and len(a) > 1 and a[-2].isalpha() and b[0].islower():
        return a[:-1] + b  # a word hyphenated at the line end
    return a + " " + b


def lines_text(lines: list[Line], pitch: float | None = None, hard: bool = False) -> str:
    """A block's text, rows top to bottom. Rows join with a space, except on a hard-wrapped
    fixed-pitch page: there a row runs on into the next, with a space only where a blank
    cell ends the row or starts the next."""
    rows = rows_of(lines)
    spans = [row_span(r, pitch) for r in rows] if hard and pitch else None
    left = min(a for a, _ in spans) if spans else 0.0
    right = max(b for _, b in spans) if spans else 0.0
    text = ""
    for i, row in enumerate(rows):
        row_text = ""
        for ln in row:
            row_text = join_text(row_text, ln.text.strip())
        if spans and i:
            blank = round((right - spans[i - 1][1]) / pitch) + round((spans[i][0] - left) / pitch)
            text += (" " if blank else "") + row_text
        else:
            text = join_text(text, row_text)
    return text
