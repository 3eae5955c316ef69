"""`python -m treedec run strategy=padoc [compare=sequential]`: parse pages, score them,
measure depth and speed; with `compare`, the baseline runs on the same pages in the same
process and the summary gives ratios (baseline / this strategy). With `concurrency=[1,4,16]`
the same pages are decoded once per level (pages in flight) for throughput and latency
curves (`by_concurrency`, concurrency.png); pages and quality come from the largest level."""
from __future__ import annotations

import sys
from functools import partial
from typing import Any, Sequence

import torch

from treedec.cluster import make_executor
from treedec.commands.run_inputs import (check_some_readable, documents_of, drafter_figures, flagged_line,
                                         input_figures, interrupted, model_notes, page_views)
from treedec.data import open_dataset
from treedec.formats.declare import model_format
from treedec.io.documents import write_documents
from treedec.models.loader import load_vlm
from treedec.records import RunResult
from treedec.report.html import write_report
from treedec.report.lead import lead_rows, why
from treedec.report.plots import concurrency_curves, steps_histogram, stream_timelines
from treedec.report.tables import level_rows, phase_rows, print_levels, print_summary
from treedec.results.quality import quality_figures
from treedec.results.speed import CURVES_HINT, add_ratios, concurrency_levels, measure_levels
from treedec.run.outputs import RunOutput
from treedec.run.passes import run_pass
from treedec.run.resume import Sitting
from treedec.run.summary import run_summary, runtime_notes
from treedec.runtimes.base import Runtime
from treedec.runtimes.select import make_runtime

__all__ = ["main"]


def main(cfg, out: RunOutput) -> dict:
    torch.set_num_threads(int(cfg.runtime.threads))
    runtime = make_runtime(cfg.runtime)  # checks the runtime's config before any page is read
    executor = make_executor(cfg)  # executor=ray: the passes' pages decoded by Ray actors (treedec.cluster)
    try:  # every pass shares the engines it starts (vLLM's), closed at the end
        return _run(cfg, out, runtime, executor)
    finally:
        runtime.close()
        if executor is not None:
            executor.close()


def _run(cfg, out: RunOutput, runtime: Runtime, executor=None) -> dict:
    sitting = Sitting.open(cfg, out.dir, out.remote)  # the pages earlier sittings into out= finished (treedec.run.resume)
    levels = concurrency_levels(cfg.get("concurrency"), cfg.runtime.max_pages)
    vlm = load_vlm(cfg.model)
    samples = open_dataset(cfg.data, model_pages=vlm.pages)  # read lazily, page by page, on each pass
    finished = sitting.finished(samples, cfg.strategy.name)
    if finished is not None:  # every page was decoded by earlier sittings: their summary stands
        return finished
    alerts = _say(model_notes(cfg))  # said once, on stderr, in summary.json and at the top of the report
    names = [cfg.strategy.name] + ([cfg.compare] if cfg.compare else [])
    by_level, results = _decode_levels(cfg, vlm, samples, names, levels, out, runtime, sitting, executor)
    every = sitting.with_earlier(results[0], samples)  # + the earlier sittings' pages: quality and documents cover all
    quality, per_page_q = quality_figures(every)
    _write_pages(out, results[0], per_page_q)
    summary = run_summary(results, names, by_level, quality, pages=len(samples), fmt=model_format(cfg.model, vlm),
                          scored=every,
                          inputs={**input_figures(samples, every.records), **sitting.figures(len(results[0].records)),
                                  **drafter_figures(cfg.strategy), **(executor.figures() if executor else {})},
                          concurrency=levels[-1], steps_counted=runtime.steps_counted, forced=vlm.forced,
                          alerts=alerts, runtime_notes=_say(runtime_notes(results), f"runtime={cfg.runtime.name}: "))
    write_documents(out.dir / "documents", documents_of(samples), {r.name: r for r in every.records})
    plots, notes = _plots(out, results, by_level, levels, len(samples), int(cfg.timelines))
    print_summary(summary)
    if len(levels) > 1:
        print_levels(by_level)
    _report(cfg, out, summary, samples, every, per_page_q, plots, notes)
    check_some_readable(out, summary)
    flagged = flagged_line(summary)
    if flagged:  # the terminal's last lines: which inputs to look at
        print(f"note: {flagged}", file=sys.stderr)
    return summary


def _say(notes: list[str], prefix: str = "") -> list[str]:
    """`notes`, each said on stderr as it is found."""
    for note in notes:
        print(f"note: {prefix}{note}", file=sys.stderr)
    return notes


def _decode_levels(cfg, vlm, samples, names: list[str], levels: list[int], out: RunOutput, runtime: Runtime,
                   sitting: Sitting, executor=None):
    """Every strategy (`names`: the configured one, then the compared one) at every level, on the
    pages `sitting` has not finished yet; the configured strategy's pages at the largest level are
    written as they finish, so an interrupted run keeps them (and a rerun resumes after them);
    every pass shares `runtime`'s engines (or runs on `executor`'s actors). The by-concurrency rows
    and the results at the largest level."""
    strategies = [cfg.strategy] + ([{"name": cfg.compare}] if cfg.compare else [])
    todo = sitting.remaining(samples)  # the pages left to decode
    written: dict[str, Any] = {}

    def write(rec) -> None:
        written[rec.name] = rec
        out.page(rec.name, rec.figures(), rec.page)
        sitting.done(rec)

    try:
        by_level, results_by_level = measure_levels(
            lambda i, level, progress: (executor.run_pass if executor else partial(run_pass, beside=runtime))(
                strategies[i], vlm, todo, cfg, level, progress,
                on_record=write if (i, level) == (0, levels[-1]) else None),
            names, levels)
    except KeyboardInterrupt:
        interrupted(cfg, out, samples, written, sitting.earlier_records(samples))
    if cfg.compare:
        add_ratios(by_level, cfg.compare)
    return by_level, results_by_level[levels[-1]]  # pages, quality and the top-level figures: the largest level


def _write_pages(out: RunOutput, res: RunResult, per_page_q: dict[str, dict]) -> None:
    """Each page's JSON again, with its quality figures and their flags after the decode's."""
    for rec in res.records:
        q = per_page_q.get(rec.name, {})
        out.page(rec.name, {**rec.figures(), **{k: v for k, v in q.items() if k != "flags"},
                            "flags": rec.flags + q.get("flags", [])}, rec.page)


def _plots(out: RunOutput, results: Sequence[RunResult], by_level: list[dict], levels: list[int], pages: int,
           timelines: int) -> tuple[list, list[str]]:
    """The run's plots (steps histogram, stream timelines, concurrency curves when more than one
    level) and the notes under them."""
    plots = [steps_histogram(results, out.dir / "steps_hist.png"),
             stream_timelines(results[0], timelines, out.dir / "timelines.png")]
    if len(levels) > 1:
        plots.append(concurrency_curves(by_level, out.dir / "concurrency.png",
                                        f"{pages} pages at each level, same process"))
        return [p for p in plots if p is not None], []
    return [p for p in plots if p is not None], [
        f"Throughput and latency vs concurrency: one level measured ({levels[0]} pages in flight); "
        f"run with {CURVES_HINT} for the curves."]


def _report(cfg, out: RunOutput, summary: dict, samples, res: RunResult, per_page_q: dict[str, dict], plots: list,
            notes: list[str]) -> None:
    """report.html: the strategy beside its baseline, the plots, the tables, a look at pages."""
    flagged = flagged_line(summary)
    by_level = summary["by_concurrency"]
    write_report(out.dir, summary,
                 {r.name: {**r.figures(), **per_page_q.get(r.name, {}), "flags": r.flags} for r in res.records},
                 plots, title=f"treedec run: {cfg.strategy.name} on {len(samples)} pages", notes=notes,
                 tables={"Throughput and latency by concurrency (every figure: summary.json by_concurrency)":
                         level_rows(by_level)},
                 alerts=[*([flagged] if flagged else []), *summary.get("notes", []),
                         *(f"runtime={cfg.runtime.name}: {n}" for n in summary.get("runtime_notes", []))],
                 lead=lead_rows(summary), lead_names=(cfg.strategy.name, cfg.compare),
                 lead_notes=[n for n in [why(summary)] if n],
                 lead_tables={"Where the wall time went, by phase (s; per page: summary.json phases_per_page_s)":
                              phase_rows(by_level)},
                 views=page_views(samples, {r.name: r for r in res.records}, cfg.get("report_pages", 12)))
