"""All quality figures of one page: a ground-truth `Page` against predicted blocks."""
from __future__ import annotations

from dataclasses import dataclass, field

from treedec.metrics.blocks import FORMULA, LATEX_TABLE, TABLE, PredBlock
from treedec.metrics.edit_distance import EditTally
from treedec.metrics.gt_items import SCORED_TEXT, gt_pools
from treedec.metrics.normalize import keep_word_chars, latex_to_unicode
from treedec.metrics.quick_match import Match, quick_match
from treedec.metrics.table_html import normalize_table_html
from treedec.metrics.table_match import TablePair, match_tables
from treedec.metrics.teds import teds
from treedec.page import Page


@dataclass
class TableScore:
    teds: float
    teds_structure: float


@dataclass
class PageScore:
    text: EditTally = field(default_factory=EditTally)
    formula: EditTally = field(default_factory=EditTally)
    table_edit: EditTally = field(default_factory=EditTally)
    reading_order: EditTally = field(default_factory=EditTally)
    tables: list[TableScore] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)


def _formula_as_text(m: Match) -> tuple[str, str]:
    """A display formula matched to a text prediction is scored as text: its LaTeX
    rendered to Unicode and normalized like text."""
    try:
        rendered = latex_to_unicode(m.gt_raw)
    except Exception:  # pylatexenc rejects the LaTeX: compare it as written
        rendered = m.gt_raw
    return keep_word_chars(rendered) or rendered, m.norm_pred


def _score_matches(score: PageScore, matches: list[Match]) -> None:
    for m in matches:
        if m.gt_category in SCORED_TEXT:
            score.text.add(m.norm_gt, m.norm_pred)
        elif m.gt_category == "equation_isolated":
            if m.pred_kind is None or m.pred_kind == FORMULA:
                score.formula.add(m.norm_gt, m.norm_pred)
            else:
                score.text.add(*_formula_as_text(m))
    gt_order, pred_order = order_sequences(matches)
    if gt_order or pred_order:
        score.reading_order.add(gt_order, pred_order)


def _score_table(pair: TablePair) -> tuple[TableScore, str, str]:
    gt = normalize_table_html(pair.gt) or pair.gt
    pred = normalize_table_html(pair.pred) or pair.pred
    return TableScore(teds(pred, gt), teds(pred, gt, structure_only=True)), gt, pred


def _grouped_by_kind(blocks: list[PredBlock]) -> list[PredBlock]:
    """Blocks grouped by kind, kinds in order of first appearance (the order the official
    tool offers them in, which decides ties of position)."""
    kinds = dict.fromkeys(b.kind for b in blocks)
    return [b for kind in kinds for b in blocks if b.kind == kind]


def score_page(gt: Page, preds: list[PredBlock]) -> PageScore:
    """Match the page's tables, then its text and formulas (with left-over table cells
    as text), and score every match."""
    text_pool, gt_tables = gt_pools(gt)
    table_pairs, cells = match_tables(gt_tables, preds)
    mix = _grouped_by_kind([b for b in preds if b.kind not in (TABLE, LATEX_TABLE)]) + cells
    score = PageScore(matches=quick_match(text_pool, mix))
    _score_matches(score, score.matches)
    for pair in table_pairs:
        table, norm_gt, norm_pred = _score_table(pair)
        score.tables.append(table)
        score.table_edit.add(norm_gt, norm_pred)
    return score


def order_sequences(matches: list[Match]) -> tuple[list, list]:
    """(ground-truth orders sorted, the same in predicted order), from text matches: the
    reading-order edit distance compares the two (Levenshtein over the sequences, divided by
    the longer length). Unmatched ground truth counts on the ground-truth side only."""
    text = [m for m in matches if m.gt_category in SCORED_TEXT and m.gt_orders != [""]]
    paired = sorted(((m.pred_position, m.gt_orders) for m in text if m.pred_position is not None),
                    key=lambda pm: pm[0])
    gt = sorted(o for m in text for o in m.gt_orders if o)
    pred = [o for _, orders in paired for o in orders if o]
    return gt, pred
