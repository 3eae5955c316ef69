"""Plot helpers (matplotlib, Agg canvas: no display, no global pyplot state)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def histogram(values: Sequence[float], path: str | Path, title: str, xlabel: str, bins: int = 20) -> Path:
    """Histogram of one per-page figure (None values left out)."""
    data = [v for v in values if v is not None]
    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    ax.hist(data, bins=bins, color="tab:blue", alpha=0.8)
    ax.set_title(f"{title} ({len(data)} pages)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pages")
    return _save(fig, path)


def per_page_bars(per_page: Mapping[str, Mapping], keys: Sequence[str], path: str | Path, title: str) -> Path:
    """Horizontal grouped bars: one group per page, one bar per figure in `keys` (missing
    figures drawn as no bar). Page names are shortened to 40 characters."""
    names = list(per_page)
    height = 0.8 / max(1, len(keys))
    fig = Figure(figsize=(8, 1.2 + 0.28 * len(names) * max(1, len(keys)) ** 0.5))
    ax = fig.add_subplot()
    for k, key in enumerate(keys):
        values = [per_page[n].get(key) for n in names]
        ys = [i + k * height for i in range(len(names))]
        ax.barh(ys, [v if v is not None else 0 for v in values], height=height, label=key)
    ax.set_yticks([i + height * (len(keys) - 1) / 2 for i in range(len(names))])
    ax.set_yticklabels([n if len(n) <= 40 else n[:37] + "..." for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_title(title, pad=22)
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(keys), frameon=False)
    return _save(fig, path)


def concurrency_curves(rows: Sequence[Mapping], path: str | Path, title: str | None = None) -> Path:
    """Pages/s and P95 latency against concurrency (log x), one line per strategy: the
    `by_concurrency` rows of `run` or experiments/bench_engine.py."""
    fig = Figure(figsize=(10, 3.6))
    thru, lat = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    levels = sorted({int(r["concurrency"]) for r in rows})
    for name in dict.fromkeys(r["strategy"] for r in rows):
        rs = sorted((r for r in rows if r["strategy"] == name), key=lambda r: r["concurrency"])
        xs = [r["concurrency"] for r in rs]
        thru.plot(xs, [r["pages_per_s"] for r in rs], "o-", label=name)
        lat.plot(xs, [r["p95_latency_s"] for r in rs], "o-", label=name)
    for ax, label in ((thru, "pages/s (higher is better)"), (lat, "P95 page latency, s (lower is better)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(c) for c in levels])
        ax.minorticks_off()
        ax.set_xlabel("concurrent pages")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def steps_histogram(results: Sequence, path: str | Path) -> Path:
    """Critical-path forward steps per page, one histogram per run (`RunResult`s) on shared bins."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    top = max((r.steps for res in results for r in res.records), default=1)
    bins = np.linspace(0, top * 1.02 + 1, 30)
    for res in results:
        steps = [r.steps for r in res.records if r.steps]
        ax.hist(steps, bins=bins, alpha=0.6, label=f"{res.strategy} (median {np.median(steps):.0f})" if steps else res.strategy)
    ax.set_xlabel("critical-path forward steps per page")
    ax.set_ylabel("pages")
    ax.legend()
    return _save(fig, path)


def stream_timelines(res, n: int, path: str | Path) -> Path | None:
    """For the first `n` pages of a run (`RunResult`) with a timeline: which stream advanced at
    each of the page's forward steps; None (nothing drawn) when no page has one."""
    from matplotlib.ticker import MaxNLocator

    recs = [r for r in res.records if r.timeline][:n]
    if not recs:
        return None
    fig = Figure(figsize=(8, 1.2 + 1.6 * len(recs)))
    axes = fig.subplots(len(recs), 1, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        xs, ys = zip(*[(step, sid) for step, sids in enumerate(r.timeline, start=1) for sid in sids])  # 1..steps
        ax.scatter(xs, ys, s=2, marker="s", c=["tab:blue" if y == 0 else "tab:orange" for y in ys])
        ax.set_ylabel("stream")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # streams are whole numbers
        ax.set_title(timeline_title(r), fontsize=9)
    axes[-1, 0].set_xlabel("forward step (stream 0 = layout / flat stream)")
    return _save(fig, path)


def timeline_title(r) -> str:
    """A timeline's title, counting the steps its axis shows (the decode's); steps on the page's
    path before decoding (HSD's stage 1, in `r.steps`) are named apart."""
    before = r.steps - len(r.timeline)
    return (f"{r.name}: {len(r.timeline)} steps" + (f" (+{before} before decoding)" if before > 0 else "")
            + f", {r.generated} tokens, {r.streams} streams")


def depth_histograms(rows: Sequence[Mapping], path: str | Path) -> Path:
    """`depth`'s pages: sequential and fork depths on shared bins, and the depth reduction."""
    seq = [r["sequential_depth"] for r in rows]
    fork = [r["fork_depth"] for r in rows]
    red = [100 * r["reduction"] for r in rows]
    fig = Figure(figsize=(10, 3.6))
    a, b = fig.subplots(1, 2)
    bins = np.linspace(0, max(seq) * 1.02 + 1, 30)
    a.hist(seq, bins=bins, alpha=0.6, label=f"sequential (median {np.median(seq):.0f})")
    a.hist(fork, bins=bins, alpha=0.6, label=f"fork (median {np.median(fork):.0f})")
    a.set_xlabel("decoding depth (forward steps)")
    a.set_ylabel("pages")
    a.legend()
    b.hist(red, bins=20, color="tab:green")
    b.axvline(np.median(red), color="k", ls="--", label=f"median {np.median(red):.1f}%")
    b.set_xlabel("depth reduction 1 - fork/sequential (%)")
    b.legend()
    fig.suptitle(f"Oracle decoding depth over {len(rows)} pages")
    return _save(fig, path)


def training_curves(history: Sequence[Mapping], path: str | Path) -> Path:
    """`train`'s loss (log) and teacher-forced token accuracy by step, each with a running mean,
    the curriculum's stage changes marked."""
    fig = Figure(figsize=(10, 3.6))
    a, b = fig.subplots(1, 2)
    rows = [h for h in history if h.get("loss", 0) > 0]  # none during the vision-only grounding warm-up
    steps = np.array([h["step"] for h in rows])
    for ax, key in ((a, "loss"), (b, "token_acc")):
        y = np.array([h[key] for h in rows])
        ax.plot(steps, y, lw=0.5, alpha=0.35, color="C0")
        k = min(25, len(y))
        if k > 1:  # a running mean over k logged points
            ax.plot(steps[k - 1:], np.convolve(y, np.ones(k) / k, mode="valid"), lw=1.4, color="C0")
        ax.set_xlabel("step")
    if history and rows and rows[0]["step"] > history[0]["step"]:
        fig.suptitle(f"text losses start at step {rows[0]['step']} (vision-only grounding warm-up before)", fontsize=8)
    a.set_yscale("log")
    a.set_ylabel("training loss (per token)")
    b.set_ylabel("teacher-forced token accuracy")
    b.set_ylim(0, 1)
    changes = [h for prev, h in zip(history, history[1:]) if h.get("stage") != prev.get("stage")]
    for i, h in enumerate(changes):  # curriculum stage changes; labels staggered so close ones stay legible
        for ax in (a, b):
            ax.axvline(h["step"], color="grey", ls=":", lw=0.8)
        b.annotate(f" stage {h.get('stage')}", (h["step"], 0.02 + 0.06 * (i % 3)), fontsize=7, color="grey")
    return _save(fig, path)


BRANCH_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                  "#7f7f7f"]


def draw_regions(image, blocks, size: tuple[int, int], by_branch: bool, width: int = 560):
    """A copy of `image` `width` px wide with `blocks`' boxes (in the page's own pixels,
    `size`) drawn on it: block k in colour k when the page was decoded as branches (block k
    is content branch k), else all in the first colour; each labelled `k category`."""
    from PIL import ImageDraw

    view = image.convert("RGB")
    f = width / view.width
    view = view.resize((width, max(1, round(view.height * f))))
    sx, sy = view.width / size[0], view.height / size[1]
    draw = ImageDraw.Draw(view)
    for k, b in enumerate(blocks):
        colour = BRANCH_COLOURS[k % len(BRANCH_COLOURS)] if by_branch else BRANCH_COLOURS[0]
        x1, y1, x2, y2 = b.bbox
        box = [x1 * sx, y1 * sy, max(x1 * sx, x2 * sx), max(y1 * sy, y2 * sy)]
        draw.rectangle(box, outline=colour, width=2)
        label = f"{k + 1} {b.category}"
        top = box[1] - 11 if box[1] >= 11 else box[1]  # above the box where there is room: the text stays visible
        draw.rectangle([box[0], top, box[0] + draw.textlength(label) + 4, top + 11], fill=colour)
        draw.text((box[0] + 2, top), label, fill="white")
    return view
