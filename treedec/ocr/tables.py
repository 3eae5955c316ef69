"""Tables: ruled grids read from their rules (rows, columns, merged cells; cell text from
the OCR lines inside), ruled frames the layout model missed, and SLANet's HTML for any
other table region."""
from __future__ import annotations

import re

import numpy as np

from treedec.boxes import iou
from treedec.ocr.geometry import Box, Line, Region, area, center, overlap_area, point_in, rows_of
from treedec.ocr.text import lines_text


def rule_masks(ink_page: np.ndarray, unit: float) -> tuple[np.ndarray, np.ndarray]:
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
        c = center(ln.box)
        for i, cell in enumerate(cells):
            if point_in(c, cell["box"]):
                filled.add(i)
                inside += 1
                break
    return len(filled) >= 2 and inside >= 0.8 * len(lines)


def grid_html(cells: list[dict], lines: list[Line]) -> str:
    """OmniDocBench-style table HTML; each OCR line goes to the cell holding its center."""
    texts: dict[int, list[Line]] = {i: [] for i in range(len(cells))}
    for ln in lines:
        c = center(ln.box)
        for i, cell in enumerate(cells):
            if point_in(c, cell["box"]):
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
        out.append(f"<td{span}>{escape(lines_text(texts[i]))}</td>")
    out.append("</tr></table>")
    return "".join(out)


def escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_EMPTY_ROW = re.compile(r"<tr>(?:<td(?: [^>]*)?></td>)*</tr>")


def clean_table_html(html: str) -> str:
    """SLANet output in the ground truth's form: no html/body wrapper, no all-empty rows
    (its usual failure on small tables is a run of them)."""
    html = re.sub(r"</?(html|body)>", "", html).strip()
    html = re.sub(r"</?(thead|tbody)>", "", html)
    return _EMPTY_ROW.sub("", html)


def ruled_regions(hmask, vmask, regions: list[Region], lines: list[Line], shape) -> list[Region]:
    """Ruled frames the layout missed: a grid with text in it is a table, an empty frame
    a figure. Drops from `regions` (in place) those a new table covers."""
    import cv2

    H, W = shape
    _, _, stats, _ = cv2.connectedComponentsWithStats((hmask | vmask).astype(np.uint8), connectivity=8)
    frames = []
    for x, y, bw, bh, _ in stats[1:]:
        b = (float(x), float(y), float(x + bw), float(y + bh))
        if bw < 0.05 * W or bh < 0.02 * H:
            continue
        frames.append(b)
    frames = [f for f in frames if not any(g != f and overlap_area(f, g) > 0.9 * area(f) for g in frames)]
    out: list[Region] = []
    for f in sorted(frames, key=lambda b: (b[1], b[0])):
        inside = [l for l in lines if point_in(center(l.box), f)]
        grid = parse_ruled_grid(hmask, vmask, f) if inside else None
        if grid_holds(grid, inside):  # a ruled grid with text in its cells: a table
            if any(r.category == "table" and iou(f, r.box) >= 0.3 for r in regions):
                continue
            regions[:] = [r for r in regions if overlap_area(f, r.box) < 0.5 * area(r.box)]
            out.append(Region("table", f, 0.5, "ruled", grid=grid))
            continue
        if any(overlap_area(f, r.box) > 0.3 * min(area(f), area(r.box)) for r in regions + out):
            continue
        text = sum(overlap_area(l.box, f) for l in inside)
        if text < 0.1 * area(f) and area(f) >= 0.004 * W * H:  # a frame round marks, not text
            out.append(Region("figure", f, 0.5, "ruled"))
    return out


def rows_table(lines: list[Line]) -> str:
    """A table of one cell per row of lines: what is left when no grid and no table model
    read the region."""
    return "<table>" + "".join(f"<tr><td>{escape(lines_text(row))}</td></tr>" for row in rows_of(lines)) + "</table>"


def table_html(r: Region, bgr: np.ndarray, hmask, vmask, model=None) -> str:
    """A table region's HTML: from its ruled grid when the grid holds its lines, else from
    SLANet (`model`: a RapidTable, None for no table model), else one cell per row. Marks
    which on `r.source` (`+grid`, `+slanet`)."""
    grid = r.grid if r.grid is not None else parse_ruled_grid(hmask, vmask, r.box)
    if grid_holds(grid, r.lines):
        r.source += "+grid"
        return grid_html(grid, r.lines)
    if not r.lines:
        return ""
    if model is None:
        return rows_table(r.lines)
    x1, y1, x2, y2 = (round(v) for v in r.box)
    pad = 4
    ox, oy = max(0, x1 - pad), max(0, y1 - pad)
    crop = np.ascontiguousarray(bgr[oy:y2 + pad, ox:x2 + pad])
    ocr = [[[[l.box[0] - ox, l.box[1] - oy], [l.box[2] - ox, l.box[1] - oy], [l.box[2] - ox, l.box[3] - oy],
             [l.box[0] - ox, l.box[3] - oy]], l.text, l.score] for l in r.lines]
    try:
        html = model(crop, ocr)[0]
    except Exception:  # noqa: BLE001 -- a model failure must not lose the page: fall back to rows
        return rows_table(r.lines)
    r.source += "+slanet"
    return clean_table_html(html)
