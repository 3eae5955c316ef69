"""A run's pages scored against their ground truth (treedec.results.evaluate): the quality figures of
summary.json and of each page's JSON."""
from __future__ import annotations

from typing import Any

from treedec.results.evaluate import evaluate_pages
from treedec.records import RunResult
from treedec.formats import get_format

# the quality figures of summary.json, for the strategy and (under "baseline") the compared one
QUALITY_KEYS = ("text_edit", "text_edit_all", "table_teds", "table_teds_s", "formula_edit", "reading_order_edit",
                "overall", "layout_precision", "layout_recall", "layout_f1")


def quality_figures(res: RunResult) -> tuple[dict[str, Any], dict[str, dict]]:
    """The run's data-set figures and its per-page figures (page name -> figures and `flags`);
    both empty when no page has a ground truth."""
    gts = [r.gt for r in res.records if r.gt is not None]
    if not gts:
        return {}, {}
    ev = evaluate_pages({r.name: r.page for r in res.records}, gts)
    per_page = ev.pop("per_page")
    return ev, per_page


def truth_text_edit(gts: list, fmt=None) -> float | None:
    """The text edit of the ground truth pages `gts` themselves, each page written in the run's
    output format `fmt` (default: treedec's) and read back, under the evaluator: what a forced
    run, which returns the ground truth, scores at best
    (OmniDocBench's merging of `truncated` chains keeps a block's text twice where a chain has 3
    blocks, which no prediction matches: docs/forced_results.md)."""
    fmt = fmt or get_format("treedec")
    if not gts:
        return None
    return evaluate_pages({g.name: fmt.parse(fmt.render(g), g.width, g.height).page for g in gts}, gts)["text_edit"]
