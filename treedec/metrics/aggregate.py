"""Data-set figures from page scores, with OmniDocBench's aggregations."""
from __future__ import annotations

from typing import Any

from treedec.metrics.edit_distance import EditTally, page_average, whole
from treedec.metrics.page_score import PageScore

OVERALL_NOTE = ("overall = mean of (1 - text_edit) * 100, table_teds * 100 and (1 - formula_edit) * 100 over the "
                "parts present; the formula part uses formula edit distance in place of CDM")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def overall(text_edit: float | None, table_teds: float | None, formula_edit: float | None) -> dict[str, Any]:
    """OmniDocBench's Overall, ((1 - TextEdit) * 100 + TableTEDS + FormulaScore) / 3, with
    (1 - formula edit) * 100 standing in for CDM; averaged over the parts present."""
    parts = {"text": None if text_edit is None else (1 - text_edit) * 100,
             "table": None if table_teds is None else table_teds * 100,
             "formula": None if formula_edit is None else (1 - formula_edit) * 100}
    present = [v for v in parts.values() if v is not None]
    return {"overall": _mean(present), "overall_parts": parts, "overall_note": OVERALL_NOTE}


def page_figures(score: PageScore) -> dict[str, Any]:
    """Per-page figures (None where the page has nothing of that kind)."""
    return {
        "text_edit": score.text.ratio, "text_samples": score.text.samples,
        "formula_edit": score.formula.ratio, "formula_samples": score.formula.samples,
        "table_teds": _mean([t.teds for t in score.tables]),
        "table_teds_s": _mean([t.teds_structure for t in score.tables]),
        "tables": [{"teds": t.teds, "teds_s": t.teds_structure} for t in score.tables],
        "table_edit": score.table_edit.ratio,
        "reading_order_edit": score.reading_order.ratio,
    }


def dataset_figures(scores: list[PageScore]) -> dict[str, Any]:
    """Page averages (`*_edit`), all-sample ratios (`*_edit_all`), mean TEDS over tables,
    and Overall."""
    def tallies(kind: str) -> list[EditTally]:
        return [getattr(s, kind) for s in scores]

    tables = [t for s in scores for t in s.tables]
    figures = {
        "text_edit": page_average(tallies("text")), "text_edit_all": whole(tallies("text")),
        "formula_edit": page_average(tallies("formula")), "formula_edit_all": whole(tallies("formula")),
        "table_teds": _mean([t.teds for t in tables]), "table_teds_s": _mean([t.teds_structure for t in tables]),
        "table_edit": page_average(tallies("table_edit")), "table_edit_all": whole(tallies("table_edit")),
        "reading_order_edit": page_average(tallies("reading_order")),
        "reading_order_edit_all": whole(tallies("reading_order")),
        "text_samples": sum(s.text.samples for s in scores),
        "formula_samples": sum(s.formula.samples for s in scores), "tables": len(tables),
    }
    figures.update(overall(figures["text_edit"], figures["table_teds"], figures["formula_edit"]))
    return figures
