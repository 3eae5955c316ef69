"""Pairing ground-truth tables with predicted tables (one assignment per page).

Tables are paired by minimum total normalized edit distance of their raw HTML; a ground
truth table left without a prediction is scored against nothing. When a page holds more
LaTeX than HTML tables, its tables score as unpredicted (the official end-to-end
evaluation blanks LaTeX table predictions). Predicted tables left over give the texts of
their plain-text `<td>` cells to the text pool.
"""
from __future__ import annotations

from dataclasses import dataclass

from treedec.metrics.assignment import assign, distance_matrix
from treedec.metrics.blocks import LATEX_TABLE, TABLE, TEXT, GtItem, PredBlock
from treedec.metrics.table_html import cell_texts


@dataclass
class TablePair:
    gt: str  # ground-truth HTML
    pred: str  # predicted HTML, "" when none


def _leftover_cells(raw: list[PredBlock], kept: list[str], used: set[int]) -> list[PredBlock]:
    """Cell texts of unassigned predicted tables, placed at their table (looked up by
    index in the unfiltered list, as the official tool does)."""
    return [PredBlock(TEXT, text, raw[k].position)
            for k in range(len(kept)) if k not in used for text in cell_texts(raw[k].content)]


def _pair(gt_keys: list[str], preds: list[PredBlock]) -> tuple[dict[int, int], list[str], list[PredBlock]]:
    """Assignment of ground truths (by key) to non-empty predictions, and left-over cells."""
    kept = [b.content for b in preds if b.content]
    pairs = dict(assign(distance_matrix(gt_keys, kept)))
    return pairs, kept, _leftover_cells(preds, kept, set(pairs.values()))


def _latex_page(gt_tables: list[GtItem], latex: list[PredBlock]) -> tuple[list[TablePair], list[PredBlock]]:
    """More LaTeX than HTML tables: ground truths with both HTML and LaTeX are paired with
    the LaTeX predictions (on their LaTeX) only to find left-over predictions; every such
    ground truth scores as unpredicted."""
    gts = [t for t in gt_tables if t.content and t.latex]
    if not gts:
        return [], []
    _, _, cells = _pair([t.latex for t in gts], latex)
    return [TablePair(t.content, "") for t in gts], cells


def match_tables(gt_tables: list[GtItem], preds: list[PredBlock]) -> tuple[list[TablePair], list[PredBlock]]:
    """(one pair per scored ground-truth table, cell texts of left-over predictions)."""
    html = [b for b in preds if b.kind == TABLE]
    latex = [b for b in preds if b.kind == LATEX_TABLE]
    if not gt_tables:
        return [], []
    if len(latex) > len(html):
        return _latex_page(gt_tables, latex)
    gts = [t.content for t in gt_tables if t.content]
    if not gts:
        return [], []
    if not any(b.content for b in html):
        return [TablePair(g, "") for g in gts], []
    pairs, kept, cells = _pair(gts, html)
    return [TablePair(g, kept[pairs[i]] if i in pairs else "") for i, g in enumerate(gts)], cells
