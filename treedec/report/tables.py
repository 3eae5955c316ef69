"""The tables `run` shows beside its report: rows of the by-concurrency and by-phase tables
(report.html) and the terminal's summary tables (rich)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from treedec.report.lead import ratio_mark

# the report's by-concurrency table: what a person compares across levels (summary.json has every figure)
LEVEL_COLUMNS = ("concurrency", "strategy", "pages", "median_steps", "forward_passes", "pages_per_s",
                 "projected_pages_per_s", "p95_latency_s",
                 "median_latency_s", "same_text", "steps_ratio", "throughput_ratio", "p95_ratio")
# the terminal's summary: the figures a person reads first
SUMMARY_KEYS = ("text_edit", "layout_f1", "median_steps", "tokens_per_step", "pages_per_s", "p95_latency_s",
                "steps_ratio", "throughput_ratio", "p95_ratio", "pages_flagged")


def level_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The by-concurrency rows (summary.json `by_concurrency`) cut to LEVEL_COLUMNS, ratios marked better/worse."""
    return [{k: ratio_mark(r.get(k)) if k.endswith("_ratio") else r.get(k) for k in LEVEL_COLUMNS} for r in rows]


def phase_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per strategy and level: where the wall time went (load, draft, stage 1, decode, write),
    the forward passes of the whole run and the decode seconds one cost."""
    out = []
    for r in rows:
        ph = r.get("phases_s") or {}
        out.append({"strategy": r["strategy"], "concurrency": r["concurrency"], "drafts": r.get("drafts") or "none",
                    **{k: ph.get(k) for k in ph}, "per_page": ph.get("total", 0.0) / r["pages"] if r["pages"] else None,
                    "forward passes": r.get("forward_passes"), "decode s / pass": r.get("decode_per_forward_s"),
                    "warmup (untimed)": r.get("warmup_s")})
    return out


def print_summary(s: Mapping[str, Any]) -> None:
    """The summary's first figures as a table on the terminal."""
    t = Table(title=f"{s['strategy']} on {s['pages']} pages")
    t.add_column("figure")
    t.add_column("value")
    for k in SUMMARY_KEYS:
        if s.get(k) is not None:
            v = s[k]
            t.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    Console().print(t)


def print_levels(rows: Sequence[Mapping[str, Any]]) -> None:
    """The by-concurrency rows as a table on the terminal."""
    t = Table(title="by concurrency")
    for c in ("concurrency", "strategy", "pages/s", "p95 s", "median s", "thru x", "p95 x", "same text"):
        t.add_column(c, justify="left" if c == "strategy" else "right")
    for r in rows:
        cells = [r.get(k) for k in ("pages_per_s", "p95_latency_s", "median_latency_s", "throughput_ratio", "p95_ratio",
                                    "same_text")]
        t.add_row(str(r["concurrency"]), r["strategy"], *("-" if v is None else f"{v:.3g}" for v in cells))
    Console().print(t)
