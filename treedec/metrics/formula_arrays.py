"""One-column `array` formulas split into one formula per row (both sides, before matching)."""
from __future__ import annotations

import re
from dataclasses import replace

from treedec.metrics.blocks import FORMULA, GtItem, PredBlock

_ARRAY = re.compile(r"\\begin\{array\}\{(?P<spec>[^}]*)\}(?P<body>.*?)\\end\{array\}", re.S)
_ROW_BREAK = re.compile(r"\\\\")


def _one_column(spec: str) -> bool:
    spec = re.sub(r"\s+|\|", "", spec)
    spec = re.sub(r"@{[^}]*}", "", spec)
    spec = re.sub(r"!{[^}]*}", "", spec)
    return spec in ("l", "c", "r")


def _array_rows(latex: str) -> tuple[re.Match, list[str]] | None:
    """The array match and its non-empty rows, when `latex` holds a one-column array."""
    if "\\begin{array" not in latex:
        return None
    m = _ARRAY.search(latex)
    if m is None or not _one_column(m.group("spec")):
        return None
    return m, [row.strip() for row in _ROW_BREAK.split(m.group("body")) if row.strip()]


def split_gt_arrays(items: list[GtItem]) -> list[GtItem]:
    """Row k of an array formula with order o becomes a formula with order o + k/10."""
    out: list[GtItem] = []
    for item in items:
        found = _array_rows(item.content) if item.category == "equation_isolated" else None
        if found is None:
            out.append(item)
            continue
        base = float(item.order or 0)
        out += [replace(item, content=f"\\[{row}\\]", order=round(base + k / 10, 1))
                for k, row in enumerate(found[1], start=1)]
    return out


def split_pred_arrays(blocks: list[PredBlock]) -> list[PredBlock]:
    """Each row of a predicted array formula becomes a formula at the row's offset."""
    out: list[PredBlock] = []
    for block in blocks:
        found = _array_rows(block.content) if block.kind == FORMULA else None
        if found is None:
            out.append(block)
            continue
        m, rows = found
        body, cursor = m.group("body"), 0
        for row in rows:
            at = body.find(row, cursor)
            at = cursor if at == -1 else at
            cursor = at + len(row)
            out.append(replace(block, content=f"\\[{row}\\]", position=block.position + m.start("body") + at))
    return out
