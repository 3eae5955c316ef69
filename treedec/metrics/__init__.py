"""OmniDocBench-style quality metrics: pure functions of pages and strings.

`score_page(gt, blocks)` scores one page; `dataset_figures(scores)` aggregates. Predicted
Markdown becomes blocks with `markdown_to_blocks`, a predicted `Page` with `page_to_blocks`.

The names below are imported from their submodules on first use (PEP 562), so importing one
submodule -- the drafter's `treedec.metrics.layout` for box overlaps -- does not import scipy
and the rest (0.35 CPU-s of every drafting process's start-up).
"""
from __future__ import annotations

import importlib

_WHERE = {
    "aggregate": ("OVERALL_NOTE", "dataset_figures", "overall", "page_figures"),
    "blocks": ("GtItem", "PredBlock", "page_to_blocks"),
    "edit_distance": ("EditTally", "normalized_edit_distance"),
    "layout": ("LayoutCounts", "iou", "layout_counts"),
    "markdown_blocks": ("markdown_problems", "markdown_to_blocks"),
    "normalize": ("normalize_formula", "normalize_text"),
    "page_score": ("PageScore", "score_page"),
    "quick_match": ("Match", "quick_match"),
    "table_html": ("normalize_table_html",),
    "teds": ("teds",),
}
_MODULE = {name: module for module, names in _WHERE.items() for name in names}

__all__ = sorted(_MODULE)


def __getattr__(name: str):
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
