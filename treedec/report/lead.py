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


@dataclass(frozen=True)
class Mark:
    """A table cell's text with a class: `better` / `worse` (than the baseline) colour it."""
    text: str
    cls: str = ""


def direction(ratio: float | None, shown: str) -> str:
    """The class of a "> 1 is better" ratio as shown (`1.00x` is neither)."""
    if ratio is None or shown in ("1.00x", "&ndash;"):
        return "same"
    return "better" if ratio > 1 else "worse"


def ratio_mark(ratio: float | None) -> Mark | None:
    """A "> 1 is better" ratio as a coloured cell."""
    if ratio is None:
        return None
    shown = fmt_ratio(ratio)
    return Mark(shown, direction(ratio, shown))


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
    # why fewer steps need not mean more pages/s: the passes the whole run made, and what one cost
    for key, words, kind in (("forward_passes", "forward passes, whole run (pages batched)", "steps"),
                             ("decode_per_forward_s", "decode seconds per forward pass", "seconds")):
        if summary.get(key) is not None:
            rows.append(LeadRow(words, summary[key], base.get(key), _better_ratio(summary[key], base.get(key), False),
                                kind))
    return rows


def why(summary: Mapping[str, Any]) -> str | None:
    """One sentence from the measured figures: pages/s follows the forward passes times their
    cost (plus the phases around decoding), not the critical-path steps alone."""
    base = summary.get("baseline") or {}
    keys = ("steps_ratio", "throughput_ratio")
    need = ("forward_passes", "decode_per_forward_s", "phases_s")
    if any(summary.get(k) is None for k in keys) or any(not summary.get(k) or not base.get(k) for k in need):
        return None
    ours, theirs = summary["phases_s"], base["phases_s"]
    other = sum(v for k, v in ours.items() if k not in ("decode", "total"))
    other_base = sum(v for k, v in theirs.items() if k not in ("decode", "total"))
    return (f"Steps vs wall time: the critical-path steps ratio is {summary['steps_ratio']:.2f}x, the pages/s ratio "
            f"{summary['throughput_ratio']:.2f}x. Pages/s follows the forward "
            f"passes the whole run makes ({summary['forward_passes']} against {base['forward_passes']}) times what "
            f"one costs ({summary['decode_per_forward_s'] * 1e3:.1f} ms against "
            f"{base['decode_per_forward_s'] * 1e3:.1f} ms: a pass carries every stream and draft token in flight), "
            f"plus the phases around decoding ({other:.2f} s against {other_base:.2f} s: load, drafting, stage 1, "
            f"write). Table below: where the wall time went.")


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
            shown = fmt_ratio(r.ratio)
            cells += f"<td>{fmt(r.base, r.kind)}</td><td class='ratio {direction(r.ratio, shown)}'>{shown}</td>"
        body.append(f"<tr>{cells}</tr>")
    hint = "" if baseline else "<p>Run with compare=sequential to see the baseline and the ratios.</p>"
    return f"<table class='lead'><tr>{head}</tr>{''.join(body)}</table>{hint}"
