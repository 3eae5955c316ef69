"""The report's first table: the strategy beside its baseline, each figure with its ratio,
rounded to what it means (1.56x, 0.033, 12.3 pages/s); and a page as the report shows it."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass
class LeadRow:
    figure: str  # what it is, in words
    ours: float | None
    base: float | None
    ratio: float | None  # > 1: better than the baseline
    kind: str  # how to round: "quality" (3 decimals), "steps", "rate", "seconds"


@dataclass
class PageView:
    name: str
    jpeg_b64: str | None  # the page with its regions drawn
    markdown: str
    flags: list[str] = field(default_factory=list)


def _better_ratio(ours: float | None, base: float | None, higher_is_better: bool) -> float | None:
    if ours is None or base is None:
        return None
    num, den = (ours, base) if higher_is_better else (base, ours)
    return num / den if den else None


def lead_rows(summary: Mapping[str, Any]) -> list[LeadRow]:
    """Quality, critical-path steps, pages/s and P95 latency of `run`'s summary; ratios
    from the summary's own keys where it has them (steps_ratio, throughput_ratio, p95_ratio)."""
    base = summary.get("baseline") or {}
    rows = []
    for key, words, higher in (("text_edit", "text edit distance (lower is better)", False),
                               ("layout_f1", "layout F1 (higher is better)", True)):
        if summary.get(key) is not None:
            rows.append(LeadRow(words, summary[key], base.get(key), _better_ratio(summary[key], base.get(key), higher),
                                "quality"))
    for key, ratio, words, kind in (("median_steps", "steps_ratio", "critical-path steps per page (median)", "steps"),
                                    ("pages_per_s", "throughput_ratio", "pages/s", "rate"),
                                    ("p95_latency_s", "p95_ratio", "P95 page latency, s", "seconds")):
        if summary.get(key) is not None:
            rows.append(LeadRow(words, summary[key], base.get(key), summary.get(ratio), kind))
    return rows


def fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "&ndash;"
    if kind == "quality":
        return f"{value:.3f}"
    if kind == "steps":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return f"{value:.3g}"


def fmt_ratio(r: float | None) -> str:
    return "&ndash;" if r is None else f"{r:.2f}x"


def lead_table(rows: list[LeadRow], strategy: str, baseline: str | None) -> str:
    head = f"<th>figure</th><th>{html.escape(strategy)}</th>"
    if baseline:
        head += f"<th>{html.escape(baseline)} (baseline)</th><th>ratio (&gt; 1: {html.escape(strategy)} better)</th>"
    body = []
    for r in rows:
        cells = f"<td>{html.escape(r.figure)}</td><td>{fmt(r.ours, r.kind)}</td>"
        if baseline:
            cells += f"<td>{fmt(r.base, r.kind)}</td><td class='ratio'>{fmt_ratio(r.ratio)}</td>"
        body.append(f"<tr>{cells}</tr>")
    hint = "" if baseline else "<p>Run with compare=sequential to see the baseline and the ratios.</p>"
    return f"<table class='lead'><tr>{head}</tr>{''.join(body)}</table>{hint}"
