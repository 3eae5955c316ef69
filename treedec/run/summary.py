"""summary.json of `run`: the strategy's figures at the largest level (inputs, quality, speed),
the compared strategy's under "baseline" with the ratios, the forced model's floor, acceptance
by depth and the by-concurrency rows."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from treedec.engine.draft_stats import depth_figures
from treedec.records import RunResult
from treedec.results.quality import QUALITY_KEYS, quality_figures, truth_text_edit
from treedec.results.speed import speed_figures, step_figures


def run_summary(results: Sequence[RunResult], names: Sequence[str], by_level: list[dict], quality: Mapping[str, Any],
                *, pages: int, fmt=None, scored: RunResult | None = None,
                inputs: Mapping[str, Any], concurrency: int, steps_counted: bool, forced: bool,
                alerts: Sequence[str] = (), runtime_notes: Sequence[str] = ()) -> dict[str, Any]:
    """The summary of `results` (the strategy's pass at the largest level first, then the compared
    one's if any; `names`: theirs as the config gives them) whose quality figures are `quality`, of
    the pages `scored` (default: the strategy's; a resumed run's: with the earlier sittings'), as
    are its step figures (a page's own; its speed: the pages `results` decoded); `inputs`: the
    figures about the inputs."""
    res = results[0]
    speed = speed_figures(res)
    steps = step_figures([r.figures() for r in (scored or res).records])
    summary: dict[str, Any] = {"pages": pages, "strategy": names[0], "format": fmt.name if fmt else "treedec", **inputs,
                               **{k: quality.get(k) for k in QUALITY_KEYS},
                               **speed, **steps, "concurrency": concurrency, "steps_counted": steps_counted}
    if len(results) > 1:
        summary.update(baseline_figures(results[1], names[1], speed))
    if forced and quality.get("text_edit") is not None:
        summary.update(truth_figures(scored or res, quality["text_edit"], fmt))
    summary.update(depth_figures(r.by_depth for r in res.records))  # drafting runs: acceptance_by_depth
    summary["by_concurrency"] = by_level
    if alerts:
        summary["notes"] = list(alerts)
    if runtime_notes:
        summary["runtime_notes"] = list(runtime_notes)
    return summary


def baseline_figures(base: RunResult, name: str, speed: Mapping[str, Any]) -> dict[str, Any]:
    """The compared strategy's figures (`baseline`) and the ratios against the strategy's `speed`."""
    bq, _ = quality_figures(base)
    bs = speed_figures(base)
    return {"baseline": {"strategy": name, **{k: bq.get(k) for k in QUALITY_KEYS}, **bs},
            "steps_ratio": bs["median_steps"] / speed["median_steps"] if speed["median_steps"] else None,
            "throughput_ratio": speed["pages_per_s"] / bs["pages_per_s"]
            if bs["pages_per_s"] and speed["pages_per_s"] is not None else None,
            "p95_ratio": bs["p95_latency_s"] / speed["p95_latency_s"] if speed["p95_latency_s"] else None}


def truth_figures(res: RunResult, text_edit: float, fmt=None) -> dict[str, Any]:
    """A forced run's pages are the ground truth, in its output format `fmt`: the truth's own
    score (written in `fmt` and read back) is the floor of `text_edit`."""
    truth = truth_text_edit([r.gt for r in res.records if r.gt is not None], fmt)
    return {"text_edit_truth": truth, "text_edit_vs_truth": text_edit - truth}


def runtime_notes(results: Sequence[RunResult]) -> list[str]:
    """Where the runtime differs from the embedded engine, each note once."""
    return list(dict.fromkeys(n for res in results for n in res.notes))
