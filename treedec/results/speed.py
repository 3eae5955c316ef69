"""Speed figures of a decoding run, and the same pages decoded at several concurrency
levels (throughput and latency vs concurrency). Shared by `run` and
experiments/bench_engine.py."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from treedec.errors import UserError
from treedec.records import RunResult
from treedec.run.phases import PHASES

CURVES_HINT = "concurrency=[1,4,16]"


def speed_figures(res: RunResult) -> dict[str, Any]:
    """Steps, tokens per step, throughput and latency of one run (decoded pages only), end
    to end: `wall_s` holds every phase of the run (`phases_s`: load, draft, stage 1,
    decode, write), so pages/s counts them all. A page's latency (`*_latency_s`) is what
    it waits for before its output exists, every page submitted at the run's start: the
    work done for all pages before decoding (`RunResult.before_s`: loading, and drafting and
    stage 1 where they run first), its queueing (with drafting beside decoding: waiting for
    its draft) and decoding, and its share of writing; `*_decode_latency_s` is the decoding
    alone (admission to finish)."""
    recs = [r for r in res.records if r.steps]
    steps = [r.steps for r in recs]
    lat, decode = page_latencies(res)

    def pct(xs, q):
        return float(np.percentile(xs, q)) if xs else None

    return {
        **step_figures([r.figures() for r in recs]),
        "rows_per_step": rows_per_step(res, steps),
        "generated_tokens": int(sum(r.generated for r in recs)),
        "pages_per_s": len(recs) / res.wall_s if recs and res.wall_s else None,  # None: nothing decoded, no speed
        "tokens_per_s": sum(r.generated for r in recs) / res.wall_s if recs and res.wall_s else None,
        "p50_latency_s": pct(lat, 50), "p95_latency_s": pct(lat, 95), "p99_latency_s": pct(lat, 99),
        "p50_decode_latency_s": pct(decode, 50), "p95_decode_latency_s": pct(decode, 95),
        "p99_decode_latency_s": pct(decode, 99),
        "forward_passes": res.forward_passes,
        # what one forward pass cost: the decode phase over the passes (every page's streams and drafts in one pass)
        "decode_per_forward_s": res.phases["decode"] / res.forward_passes
        if res.forward_passes and res.phases.get("decode") else None,
        "wall_s": res.wall_s, "warmup_s": res.warmup_s, "drafts": res.drafts,
        **phase_figures(res),
        **draft_cost_figures(res),
        **projection_figures(res),
        **res.attention,  # attention_padding (score elements handed to the kernels / real ones), per run and step
    }


def step_figures(pages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The depth figures of pages, from each page's figures (`PageRecord.figures`, or an earlier
    sitting's `pages/<name>.json`): its `steps`, `root_steps`, `generated_tokens` and
    `accepted_per_step`; pages without steps (unreadable) left out. A page's own, whichever run
    decoded it (unlike speed)."""
    pages = [p for p in pages if p.get("steps")]
    steps = [p["steps"] for p in pages]
    if not steps:
        return dict.fromkeys(("median_steps", "mean_steps", "iqr_steps", "median_root_steps", "tokens_per_step",
                              "accepted_per_step"))
    return {
        "median_steps": float(np.median(steps)),
        "mean_steps": float(np.mean(steps)),  # throughput follows the mean
        "iqr_steps": [float(np.percentile(steps, 25)), float(np.percentile(steps, 75))],
        # steps up to the root stream's end: the layout stream's share of a tree's critical path
        "median_root_steps": float(np.median([p["root_steps"] for p in pages])),
        "tokens_per_step": float(np.mean([p["generated_tokens"] / p["steps"] for p in pages])),
        "accepted_per_step": float(np.mean([p["accepted_per_step"] for p in pages])),
    }


def rows_per_step(res: RunResult, steps: list[int]) -> float | None:
    """Rows a page puts in a step it takes part in (its streams' pending tokens and draft nodes):
    from the engine's passes where it logged them (every engine of the run: HSD's stage 1 and
    the crops' rows with their steps, which the pages' steps count), else from the pages' timelines."""
    log = res.forwards
    if log is not None and log.steps:
        return log.step_rows / sum(steps) if steps else None  # so that pages x mean steps x rows_per_step = all rows
    recs = [r for r in res.records if r.steps]
    return (sum(len(t) for r in recs for t in r.timeline) + sum(r.drafted for r in recs)) / sum(steps) if steps else None


def projection_figures(res: RunResult) -> dict[str, Any]:
    """`projected_pages_per_s` beside `pages_per_s`, and its parts (`cost_model`), where the run was calibrated."""
    if res.projection is None:
        return {}
    p = res.projection
    pages = sum(1 for r in res.records if r.steps)
    measured = pages / res.wall_s if res.wall_s else None
    return {"projected_pages_per_s": p["projected_pages_per_s"],
            "projection_error": p["projected_pages_per_s"] / measured - 1 if measured and p["projected_pages_per_s"]
            else None, "cost_model": p["cost_model"]}


def page_latencies(res: RunResult) -> tuple[list[float], list[float]]:
    """Per decoded page: end-to-end latency (see `speed_figures`) and the decoding alone."""
    recs = [r for r in res.records if r.steps]
    before = res.before_s
    write = res.phases.get("write", 0.0) / len(res.records) if res.records else 0.0
    return [before + r.queue_s + r.latency_s + write for r in recs], [r.latency_s for r in recs]


def draft_cost_figures(res: RunResult) -> dict[str, Any]:
    """Where pages were drafted in worker processes (`strategy.draft_workers`), beside the
    wall time the run waited for drafts (its phase "draft"): the drafting's own CPU seconds
    and wall seconds in the workers, summed over pages."""
    costs = [r.extra for r in res.records if "draft_cpu_s" in r.extra]
    if not costs:
        return {}
    return {"draft_cpu_s": sum(c["draft_cpu_s"] for c in costs), "draft_worker_wall_s": sum(c["draft_wall_s"] for c in costs)}


def phase_figures(res: RunResult) -> dict[str, Any]:
    """`phases_s`: seconds per phase and their total (= wall_s); `phases_per_page_s`: the same per page."""
    if not res.phases:
        return {}
    total = {p: res.phases.get(p, 0.0) for p in PHASES}
    total.update({k: v for k, v in res.phases.items() if k not in total})
    total["total"] = sum(total.values())
    n = len(res.records)
    return {"phases_s": total, "phases_per_page_s": {k: v / n for k, v in total.items()} if n else {}}


def concurrency_levels(value: Any, default: int) -> list[int]:
    """`concurrency=` as sorted distinct levels: null -> [default], N -> [N], [a,b,...] as
    given. Anything else (0, negatives, non-integers, an empty list) is a one-line UserError."""
    if value is None:
        return [int(default)]
    items = list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else [value]
    bad = [v for v in items if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if not items or bad:
        shown = f"{bad[0]!r}" if bad else "[]"
        raise UserError(f"concurrency must be a positive integer or a list of them, e.g. {CURVES_HINT}; got {shown}")
    return sorted(set(int(v) for v in items))


def level_row(res: RunResult, concurrency: int) -> dict[str, Any]:
    """One row of `by_concurrency`: a strategy's speed figures at one level."""
    fig = speed_figures(res)
    fig.pop("iqr_steps")
    fig["median_latency_s"] = fig.pop("p50_latency_s")
    return {"concurrency": concurrency, "strategy": res.strategy, "pages": len(res.records), **fig}


def measure_levels(decode: Callable[[int, int, bool], RunResult], strategies: Sequence[str], levels: Sequence[int],
                   progress: bool = True) -> tuple[list[dict[str, Any]], dict[int, list[RunResult]]]:
    """Decode the same pages with every strategy at every level: `decode(i, level, progress)`
    runs strategies[i] with `level` pages in flight. Returns the `by_concurrency` rows (level
    by level, strategies in the given order) and the results by level. Each row's
    `same_text` is the fraction of pages whose flat text equals that at the largest level
    (greedy decoding should not depend on the batch)."""
    from tqdm import tqdm

    levels = sorted(levels)
    runs = [(level, i) for level in levels for i in range(len(strategies))]
    bar = tqdm(runs, desc="concurrency", unit="run", disable=not progress or len(levels) < 2)
    results: dict[int, list[RunResult]] = {}
    for level, i in bar:
        bar.set_postfix_str(f"{strategies[i]} @ {level}")
        results.setdefault(level, []).append(decode(i, level, progress))
    bar.close()
    top = results[levels[-1]]
    rows = []
    for level in levels:
        for i, res in enumerate(results[level]):
            row = level_row(res, level)
            ref = top[i].records
            row["same_text"] = sum(a.text == b.text for a, b in zip(res.records, ref)) / len(ref) if ref else None
            rows.append(row)
    return rows, results


def add_ratios(rows: list[dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Ratios against the `baseline` strategy's row at the same level (> 1: better than the
    baseline): steps_ratio, throughput_ratio, p95_ratio. Rows without a baseline are left."""
    base = {}
    for r in rows:
        if r["strategy"] == baseline:
            base.setdefault(r["concurrency"], r)

    def ratio(a, b):
        return a / b if a is not None and b else None

    for r in rows:
        b = base.get(r["concurrency"])
        if b is None:
            continue
        r["steps_ratio"] = ratio(b["median_steps"], r["median_steps"])
        r["throughput_ratio"] = ratio(r["pages_per_s"], b["pages_per_s"])
        r["p95_ratio"] = ratio(b["p95_latency_s"], r["p95_latency_s"])
    return rows
