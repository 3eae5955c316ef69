"""`python -m treedec run strategy=padoc [compare=sequential]`: parse pages, score them,
measure depth and speed; with `compare`, the baseline runs on the same pages in the same
process and the summary gives ratios (baseline / this strategy)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from treedec.data import open_dataset
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.evaluate import evaluate_pages
from treedec.models.vlm import SHIPPED, load_vlm
from treedec.outputs import RunOutput
from treedec.report import write_report
from treedec.runner import RunResult, parse_pages
from treedec.strategies.base import build_strategy


def speed_figures(res: RunResult) -> dict[str, Any]:
    recs = [r for r in res.records if r.steps]
    steps = [r.steps for r in recs]
    lat = [r.latency_s for r in recs]
    return {
        "median_steps": float(np.median(steps)) if steps else None,
        "iqr_steps": [float(np.percentile(steps, 25)), float(np.percentile(steps, 75))] if steps else None,
        "tokens_per_step": float(np.mean([r.generated / r.steps for r in recs])) if recs else None,
        "accepted_per_step": float(np.mean([r.accepted_per_step for r in recs])) if recs else None,
        "generated_tokens": int(sum(r.generated for r in recs)),
        "pages_per_s": len(recs) / res.wall_s if res.wall_s else None,
        "tokens_per_s": sum(r.generated for r in recs) / res.wall_s if res.wall_s else None,
        "p50_latency_s": float(np.percentile(lat, 50)) if lat else None,
        "p95_latency_s": float(np.percentile(lat, 95)) if lat else None,
        "forward_passes": res.forward_passes, "wall_s": res.wall_s,
    }


def quality_figures(res: RunResult) -> tuple[dict[str, Any], dict[str, dict]]:
    gts = [r.gt for r in res.records if r.gt is not None]
    if not gts:
        return {}, {}
    ev = evaluate_pages({r.name: r.page for r in res.records}, gts)
    per_page = ev.pop("per_page")
    return ev, per_page


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

    recs = [r for r in res.records if r.timeline][:n]
    if not recs:
        return
    fig, axes = plt.subplots(len(recs), 1, figsize=(8, 1.2 + 1.6 * len(recs)), squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        xs, ys = zip(*[(step, sid) for step, sids in enumerate(r.timeline) for sid in sids])
        ax.scatter(xs, ys, s=2, marker="s", c=["tab:blue" if y == 0 else "tab:orange" for y in ys])
        ax.set_ylabel("stream")
        ax.set_title(f"{r.name}: {r.steps} steps, {r.generated} tokens, {r.streams} streams", fontsize=9)
    axes[-1, 0].set_xlabel("forward step (stream 0 = layout / flat stream)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _run(strategy_cfg, vlm, samples, engine_cfg, cfg) -> RunResult:
    strategy = build_strategy(strategy_cfg, vlm.tokenizer)
    if cfg.runtime.name == "vllm":
        from treedec.runtimes.vllm import parse_pages_vllm

        path = None if cfg.model.get("name") == "random" else (cfg.model.get("path") or SHIPPED)
        return parse_pages_vllm(vlm, strategy, samples, cfg.runtime, model_path=path)
    return parse_pages(vlm, strategy, samples, engine_cfg)


def main(cfg, out: RunOutput) -> dict:
    torch.set_num_threads(int(cfg.runtime.threads))
    if cfg.runtime.name not in ("embedded", "vllm"):
        raise UserError(f"unknown runtime {cfg.runtime.name!r}; use runtime=embedded or runtime=vllm")
    engine_cfg = None if cfg.runtime.name == "vllm" else \
        EngineConfig(**{k: v for k, v in cfg.runtime.items() if k not in ("name", "threads")})
    vlm = load_vlm(cfg.model)
    samples = list(open_dataset(cfg.data))
    main_res = _run(cfg.strategy, vlm, samples, engine_cfg, cfg)
    results = [main_res]
    base = None
    if cfg.compare:
        base = _run({"name": cfg.compare}, vlm, samples, engine_cfg, cfg)
        results.append(base)
    quality, per_page_q = quality_figures(main_res)
    speed = speed_figures(main_res)
    for rec in main_res.records:
        out.page(rec.name, {**rec.figures(), **{k: v for k, v in per_page_q.get(rec.name, {}).items() if k != "flags"},
                            "flags": rec.flags + per_page_q.get(rec.name, {}).get("flags", [])}, rec.page)
    summary: dict[str, Any] = {"pages": len(samples), "strategy": cfg.strategy.name,
                               "pages_flagged": sum(bool(r.flags) for r in main_res.records),
                               **{k: quality.get(k) for k in ("text_edit", "text_edit_all", "table_teds", "table_teds_s",
                                                              "formula_edit", "reading_order_edit", "overall",
                                                              "layout_precision", "layout_recall", "layout_f1")},
                               **speed}
    if base is not None:
        bq, _ = quality_figures(base)
        bs = speed_figures(base)
        summary["baseline"] = {"strategy": cfg.compare, "text_edit": bq.get("text_edit"), "layout_f1": bq.get("layout_f1"),
                               **bs}
        summary["steps_ratio"] = bs["median_steps"] / speed["median_steps"] if speed["median_steps"] else None
        summary["throughput_ratio"] = speed["pages_per_s"] / bs["pages_per_s"] if bs["pages_per_s"] else None
        summary["p95_ratio"] = bs["p95_latency_s"] / speed["p95_latency_s"] if speed["p95_latency_s"] else None
    plots = [out.dir / "steps_hist.png", out.dir / "timelines.png"]
    plot_steps(results, plots[0])
    plot_timelines(main_res, int(cfg.timelines), plots[1])
    _print(summary)
    per_page = {r.name: {**r.figures(), **per_page_q.get(r.name, {}), "flags": r.flags} for r in main_res.records}
    write_report(out.dir, summary, per_page, [p for p in plots if p.is_file()], title=f"treedec run: {cfg.strategy.name}")
    return summary


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
