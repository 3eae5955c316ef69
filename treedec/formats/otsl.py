"""OTSL (Optimized Table Structure Language), the table form of DocTags and of MinerU2.5's and
PaddleOCR-VL's table reads: one token per grid cell, row by row, `<nl>` ending each row;
`<fcel>text` a cell with content, `<ecel>` an empty one, `<lcel>` merged into the cell to its
left (colspan), `<ucel>` into the one above (rowspan), `<xcel>` both. Header tokens
(`<ched>`, `<rhed>`, `<srow>`) are read as `<fcel>`. Written from and read back into the HTML
tables treedec keeps (cell markup kept verbatim; `<th>` becomes `<td>`)."""
from __future__ import annotations

import re

_TOKEN = re.compile(r"<(fcel|ecel|lcel|ucel|xcel|nl|ched|rhed|srow)>")


def html_to_otsl(markup: str) -> str:
    """The OTSL of the first HTML table in `markup` ("" when it holds none)."""
    from bs4 import BeautifulSoup

    table = BeautifulSoup(markup, "html.parser").find("table")
    if table is None:
        return ""
    grid: dict[tuple[int, int], str] = {}
    rows = table.find_all("tr")
    for r, tr in enumerate(rows):
        c = 0
        for cell in tr.find_all(["td", "th"], recursive=False):
            while (r, c) in grid:
                c += 1
            cs, rs = _span(cell.get("colspan")), _span(cell.get("rowspan"))
            text = cell.decode_contents()
            for dr in range(rs):
                for dc in range(cs):
                    merged = "xcel" if dr and dc else "ucel" if dr else "lcel" if dc else ""
                    grid[(r + dr, c + dc)] = merged or ("fcel" + text if text else "ecel")
            c += cs
    width = max((c for _, c in grid), default=-1) + 1
    height = max(len(rows), max((r for r, _ in grid), default=-1) + 1)
    return "".join("".join(_token(grid.get((r, c), "ecel")) for c in range(width)) + "<nl>" for r in range(height))


def _span(v) -> int:
    try:
        return max(1, int(v))
    except (TypeError, ValueError):
        return 1


def _token(cell: str) -> str:
    return f"<fcel>{cell[4:]}" if cell.startswith("fcel") else f"<{cell}>"


def otsl_to_html(otsl: str) -> str:
    """The HTML table of an OTSL string (tolerant: a row without `<nl>` still counts, text
    before the first token is dropped)."""
    rows: list[list[list[str]]] = [[]]
    parts = _TOKEN.split(otsl)
    for i in range(1, len(parts), 2):
        tag, text = parts[i], parts[i + 1]
        if tag == "nl":
            rows.append([])
        else:
            rows[-1].append(["fcel" if tag in ("ched", "rhed", "srow") else tag, text])
    rows = [r for r in rows if r]
    out = []
    for r, row in enumerate(rows):
        cells = []
        for c, (tag, text) in enumerate(row):
            if tag not in ("fcel", "ecel"):
                continue
            cs = 1 + sum(1 for _ in _run(row, c + 1, "lcel"))
            rs = 1 + sum(1 for _ in _run([rr[c] if c < len(rr) else ["", ""] for rr in rows], r + 1, "ucel"))
            attrs = (f' colspan="{cs}"' if cs > 1 else "") + (f' rowspan="{rs}"' if rs > 1 else "")
            cells.append(f"<td{attrs}>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


def _run(cells: list[list[str]], start: int, tag: str):
    for cell in cells[start:]:
        if cell[0] not in (tag, "xcel"):
            return
        yield cell
