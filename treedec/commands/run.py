"""`python -m treedec run strategy=padoc [compare=sequential]`: parse pages, score them,
measure depth and speed; with `compare`, the baseline runs on the same pages in the same
process and the summary gives ratios (baseline / this strategy). With `concurrency=[1,4,16]`
the same pages are decoded once per level (pages in flight) for throughput and latency
curves (`by_concurrency`, concurrency.png); pages and quality come from the largest level."""
from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

from treedec.cost_model import calibrate, project
from treedec.commands.run_inputs import (check_some_readable, documents_of, flagged_line, input_figures, interrupted,
                                         model_notes, page_views)
from treedec.data import open_dataset
from treedec.engine.draft_stats import depth_figures
from treedec.evaluate import evaluate_pages
from treedec.io.documents import write_documents
from treedec.models.loader import checkpoint_path, load_vlm
from treedec.outputs import RunOutput
from treedec.plots import concurrency_curves
from treedec.recalibrate import dense_waste
from treedec.report import write_report
from treedec.report_lead import lead_rows, ratio_mark, why
from treedec.records import RunResult
from treedec.runtimes.select import make_runtime
from treedec.speed import CURVES_HINT, add_ratios, concurrency_levels, measure_levels, speed_figures
from treedec.stages import run_strategy
from treedec.formats import get_format
from treedec.formats.declare import model_format
from treedec.strategies.base import build_strategy

__all__ = ["main", "quality_figures", "speed_figures"]

def quality_figures(res: RunResult) -> tuple[dict[str, Any], dict[str, dict]]:
    gts = [r.gt for r in res.records if r.gt is not None]
    if not gts:
        return {}, {}
    ev = evaluate_pages({r.name: r.page for r in res.records}, gts)
    per_page = ev.pop("per_page")
    return ev, per_page


def truth_text_edit(gts: list, fmt=None) -> float | None:
    """The text edit of the ground truth pages `gts` themselves, each page's flat form parsed back,
    under the evaluator: what a forced run, which returns the ground truth, scores at best
    (OmniDocBench's merging of `truncated` chains keeps a block's text twice where a chain has 3
    blocks, which no prediction matches: docs/forced_results.md)."""
    fmt = fmt or get_format("treedec")  # the run's output format: its pages written and read back as it does
    if not gts:
        return None
    return evaluate_pages({g.name: fmt.parse(fmt.render(g), g.width, g.height).page for g in gts}, gts)["text_edit"]


def plot_steps(results: list[RunResult], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    top = max((r.steps for res in results for r in res.records), default=1)
    bins = np.linspace(0, top * 1.02 + 1, 30)
    for res in results:
        steps = [r.steps for r in res.records if r.steps]
        ax.hist(steps, bins=bins, alpha=0.6, label=f"{res.strategy} (median {np.median(steps):.0f})" if steps else res.strategy)
    ax.set_xlabel("critical-path forward steps per page")
    ax.set_ylabel("pages")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timelines(res: RunResult, n: int, path) -> None:
    """For a few pages: which stream advanced at each of the page's forward steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    recs = [r for r in res.records if r.timeline][:n]
    if not recs:
        return
    fig, axes = plt.subplots(len(recs), 1, figsize=(8, 1.2 + 1.6 * len(recs)), squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        xs, ys = zip(*[(step, sid) for step, sids in enumerate(r.timeline, start=1) for sid in sids])  # 1..steps
        ax.scatter(xs, ys, s=2, marker="s", c=["tab:blue" if y == 0 else "tab:orange" for y in ys])
        ax.set_ylabel("stream")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # streams are whole numbers
        ax.set_title(timeline_title(r), fontsize=9)
    axes[-1, 0].set_xlabel("forward step (stream 0 = layout / flat stream)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_title(r) -> str:
    """A timeline's title, counting the steps its axis shows (the decode's); steps on the page's
    path before decoding (HSD's stage 1, in `r.steps`) are named apart."""
    before = r.steps - len(r.timeline)
    return (f"{r.name}: {len(r.timeline)} steps" + (f" (+{before} before decoding)" if before > 0 else "")
            + f", {r.generated} tokens, {r.streams} streams")


def _run(strategy_cfg, vlm, samples, cfg, level: int, progress: bool = True, on_record=None) -> RunResult:
    """Decode `samples` with `level` pages in flight (runtime.max_pages for this run), end to
    end: every run reads its pages itself (timed as the phase "load" as the engine pulls
    them) and writes its outputs: the pass whose pages `on_record` writes as they finish
    (embedded runtime) times that as its phase "write"; any other pass is charged the time to
    write its outputs into a scratch folder."""
    strategy = build_strategy(strategy_cfg, vlm.tokenizer, model_format(cfg.model, vlm))
    res = _decode(strategy, vlm, samples, cfg, level, progress, on_record)
    res = res if on_record and res.phases.get("write") else charge_write(res)
    if res.passes is not None and cfg.get("cost_model", False):  # projected_pages_per_s (treedec.cost_model)
        costs = calibrate(vlm, strategy.mode, samples, res.passes, level, dense_waste(cfg))
        res.projection = project(res.passes, costs, sum(1 for r in res.records if r.steps), res.wall_s)
    return res


def charge_write(res: RunResult) -> RunResult:
    """A run made end to end: writing its outputs (`write_seconds`) added to its wall time and phases."""
    res.charge("write", write_seconds(res))
    return res


def write_seconds(res: RunResult) -> float:
    """Seconds to write a run's page outputs (figures, OmniDocBench JSON, Markdown), as `run` does."""
    with tempfile.TemporaryDirectory(prefix="treedec-write-") as d:
        out = RunOutput(d)
        t = time.perf_counter()
        for rec in res.records:
            out.page(rec.name, rec.figures(), rec.page)
        return time.perf_counter() - t


def _decode(strategy, vlm, samples, cfg, level: int, progress: bool, on_record=None) -> RunResult:
    """One pass on the configured runtime (`runtime=embedded|vllm`) with `level` pages in flight."""
    runtime = make_runtime(OmegaConf.merge(cfg.runtime, {"max_pages": level}), checkpoint_path(cfg.model))
    return run_strategy(runtime, vlm, strategy, samples, progress=progress,
                        cold_drafts=bool(cfg.get("cold_drafts", True)), on_record=on_record)


# the quality figures of summary.json, for the strategy and (under "baseline") the compared one
QUALITY_KEYS = ("text_edit", "text_edit_all", "table_teds", "table_teds_s", "formula_edit", "reading_order_edit",
                "overall", "layout_precision", "layout_recall", "layout_f1")


def main(cfg, out: RunOutput) -> dict:
    torch.set_num_threads(int(cfg.runtime.threads))
    steps_counted = make_runtime(cfg.runtime).steps_counted  # checks the runtime's config before any page is read
    levels = concurrency_levels(cfg.get("concurrency"), cfg.runtime.max_pages)
    vlm = load_vlm(cfg.model)
    samples = open_dataset(cfg.data, model_pages=vlm.pages)  # read lazily, page by page, on each pass
    alerts = model_notes(cfg)  # said once, on stderr, in summary.json and at the top of the report
    for note in alerts:
        print(f"note: {note}", file=sys.stderr)
    strategies = [cfg.strategy] + ([{"name": cfg.compare}] if cfg.compare else [])
    names = [cfg.strategy.name] + ([cfg.compare] if cfg.compare else [])
    written: dict[str, Any] = {}

    def write(rec) -> None:  # the final pass's pages, written as they finish: an interrupted run keeps them
        written[rec.name] = rec
        out.page(rec.name, rec.figures(), rec.page)

    try:
        by_level, results_by_level = measure_levels(
            lambda i, level, progress: _run(strategies[i], vlm, samples, cfg, level, progress,
                                            on_record=write if (i, level) == (0, levels[-1]) else None), names, levels)
    except KeyboardInterrupt:
        interrupted(cfg, out, samples, written)
    if cfg.compare:
        add_ratios(by_level, cfg.compare)
    results = results_by_level[levels[-1]]  # pages, quality and the top-level figures: the largest level
    main_res = results[0]
    base = results[1] if cfg.compare else None
    quality, per_page_q = quality_figures(main_res)
    speed = speed_figures(main_res)
    for rec in main_res.records:
        out.page(rec.name, {**rec.figures(), **{k: v for k, v in per_page_q.get(rec.name, {}).items() if k != "flags"},
                            "flags": rec.flags + per_page_q.get(rec.name, {}).get("flags", [])}, rec.page)
    summary: dict[str, Any] = {"pages": len(samples), "strategy": cfg.strategy.name,
                               "format": model_format(cfg.model, vlm).name,
                               **input_figures(samples, main_res.records),
                               **{k: quality.get(k) for k in QUALITY_KEYS},
                               **speed, "concurrency": levels[-1], "steps_counted": steps_counted}
    if base is not None:
        bq, _ = quality_figures(base)
        bs = speed_figures(base)
        summary["baseline"] = {"strategy": cfg.compare, **{k: bq.get(k) for k in QUALITY_KEYS}, **bs}
        summary["steps_ratio"] = bs["median_steps"] / speed["median_steps"] if speed["median_steps"] else None
        summary["throughput_ratio"] = speed["pages_per_s"] / bs["pages_per_s"] if bs["pages_per_s"] else None
        summary["p95_ratio"] = bs["p95_latency_s"] / speed["p95_latency_s"] if speed["p95_latency_s"] else None
    if vlm.forced and quality.get("text_edit") is not None:  # the pages are the ground truth: its own score the floor
        summary["text_edit_truth"] = truth_text_edit([r.gt for r in main_res.records if r.gt is not None],
                                                     model_format(cfg.model, vlm))
        summary["text_edit_vs_truth"] = quality["text_edit"] - summary["text_edit_truth"]
    summary.update(depth_figures(r.by_depth for r in main_res.records))  # drafting runs: acceptance_by_depth
    summary["by_concurrency"] = by_level
    if alerts:
        summary["notes"] = alerts
    runtime_notes = list(dict.fromkeys(n for res in results for n in res.notes))  # where the runtime differs
    if runtime_notes:
        summary["runtime_notes"] = runtime_notes
        for note in runtime_notes:
            print(f"note: runtime={cfg.runtime.name}: {note}", file=sys.stderr)
    write_documents(out.dir / "documents", documents_of(samples), {r.name: r for r in main_res.records})
    plots = [out.dir / "steps_hist.png", out.dir / "timelines.png"]
    plot_steps(results, plots[0])
    plot_timelines(main_res, int(cfg.timelines), plots[1])
    notes = []
    if len(levels) > 1:
        plots.append(concurrency_curves(by_level, out.dir / "concurrency.png",
                                        f"{len(samples)} pages at each level, same process"))
    else:
        notes.append(f"Throughput and latency vs concurrency: one level measured ({levels[0]} pages in flight); "
                     f"run with {CURVES_HINT} for the curves.")
    _print(summary)
    if len(levels) > 1:
        _print_levels(by_level)
    per_page = {r.name: {**r.figures(), **per_page_q.get(r.name, {}), "flags": r.flags} for r in main_res.records}
    flagged = flagged_line(summary)
    write_report(out.dir, summary, per_page, [p for p in plots if p.is_file()],
                 title=f"treedec run: {cfg.strategy.name} on {len(samples)} pages", notes=notes,
                 tables={"Throughput and latency by concurrency (every figure: summary.json by_concurrency)":
                         [{k: ratio_mark(r.get(k)) if k.endswith("_ratio") else r.get(k) for k in LEVEL_COLUMNS}
                          for r in by_level]},
                 alerts=[*([flagged] if flagged else []), *alerts,
                         *(f"runtime={cfg.runtime.name}: {n}" for n in runtime_notes)],
                 lead=lead_rows(summary), lead_names=(cfg.strategy.name, cfg.compare),
                 lead_notes=[n for n in [why(summary)] if n],
                 lead_tables={"Where the wall time went, by phase (s; per page: summary.json phases_per_page_s)":
                              phase_rows(by_level)},
                 views=page_views(samples, {r.name: r for r in main_res.records}, cfg.get("report_pages", 12)))
    check_some_readable(out, summary)
    if flagged:  # the terminal's last lines: which inputs to look at
        print(f"note: {flagged}", file=sys.stderr)
    return summary


# the report's by-concurrency table: what a person compares across levels (summary.json has every figure)
LEVEL_COLUMNS = ("concurrency", "strategy", "pages", "median_steps", "forward_passes", "pages_per_s",
                 "projected_pages_per_s", "p95_latency_s",
                 "median_latency_s", "same_text", "steps_ratio", "throughput_ratio", "p95_ratio")


def phase_rows(rows: list[dict]) -> list[dict]:
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


def _print(s: dict) -> None:
    t = Table(title=f"{s['strategy']} on {s['pages']} pages")
    t.add_column("figure")
    t.add_column("value")
    keys = ["text_edit", "layout_f1", "median_steps", "tokens_per_step", "pages_per_s", "p95_latency_s",
            "steps_ratio", "throughput_ratio", "p95_ratio", "pages_flagged"]
    for k in keys:
        if s.get(k) is not None:
            v = s[k]
            t.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    Console().print(t)


def _print_levels(rows: list[dict]) -> None:
    t = Table(title="by concurrency")
    for c in ("concurrency", "strategy", "pages/s", "p95 s", "median s", "thru x", "p95 x", "same text"):
        t.add_column(c, justify="left" if c == "strategy" else "right")
    for r in rows:
        cells = [r.get(k) for k in ("pages_per_s", "p95_latency_s", "median_latency_s", "throughput_ratio", "p95_ratio",
                                    "same_text")]
        t.add_row(str(r["concurrency"]), r["strategy"], *("-" if v is None else f"{v:.3g}" for v in cells))
    Console().print(t)
