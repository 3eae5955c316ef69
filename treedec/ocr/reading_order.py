"""Reading order of a page's blocks: page furniture (header first; footer and page number
last, left to right), then the body in bands cut by full-width blocks; inside a band,
columns left to right and top to bottom within a column."""
from __future__ import annotations

from treedec.ocr.geometry import Box, center, x_overlap


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
        cy = center(boxes[i])[1]
        bands[sum(center(boxes[w])[1] < cy for w in wide)].append(i)
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
        hits = [c for c in cols if any(x_overlap(b, boxes[j]) > 0 for j in c)]
        merged = [i] + [j for c in hits for j in c]
        cols = [c for c in cols if c not in hits] + [merged]
    cols.sort(key=lambda c: min(boxes[j][0] for j in c))
    return [j for c in cols for j in sorted(c, key=lambda j: (boxes[j][1], boxes[j][0]))]


# --- ruled tables ------------------------------------------------------------------------
