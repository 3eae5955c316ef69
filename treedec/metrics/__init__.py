"""OmniDocBench-style quality metrics: pure functions of pages and strings.

`score_page(gt, blocks)` scores one page; `dataset_figures(scores)` aggregates. Predicted
Markdown becomes blocks with `markdown_to_blocks`, a predicted `Page` with `page_to_blocks`.
"""
from treedec.metrics.aggregate import OVERALL_NOTE, dataset_figures, overall, page_figures
from treedec.metrics.blocks import GtItem, PredBlock
from treedec.metrics.edit_distance import EditTally, normalized_edit_distance
from treedec.metrics.layout import LayoutCounts, iou, layout_counts
from treedec.metrics.markdown_blocks import markdown_to_blocks
from treedec.metrics.markdown_blocks import markdown_problems
from treedec.metrics.normalize import normalize_formula, normalize_text
from treedec.metrics.blocks import page_to_blocks
from treedec.metrics.page_score import PageScore, score_page
from treedec.metrics.quick_match import Match, quick_match
from treedec.metrics.table_html import normalize_table_html
from treedec.metrics.teds import teds

__all__ = [
    "OVERALL_NOTE", "EditTally", "GtItem", "LayoutCounts", "Match", "PageScore", "PredBlock", "dataset_figures",
    "iou", "layout_counts", "markdown_problems", "markdown_to_blocks", "normalize_formula", "normalize_table_html",
    "normalize_text", "normalized_edit_distance", "overall", "page_figures", "page_to_blocks", "quick_match",
    "score_page", "teds",
]
