"""Latency under load: P50/P95/P99 per page at several concurrency levels, every strategy,
end to end, plotted. A benchmark script, not a test.

Every strategy at every level decodes the same pages from a cold draft cache
(treedec.run.parse_pages.parse_pages); a page's latency is end to end (`treedec.results.speed`): what
was done for every page before decoding started (loading; drafting and stage 1 where they
run first), its queueing (with drafting beside decoding, `draft_workers`: waiting for its own
draft) and decoding, and its share of writing the outputs. All pages are submitted at once,
so at low concurrency the queue dominates; the decoding alone (admission to finish) is
reported beside it. Use at least 128 pages so that 64 in flight is a steady state. Each row
also holds the run's speed figures (steps, rows per step, phases per page).

    python experiments/bench_latency.py [--model PATH|random] [--pages 128] [--concurrency 1 4 16 64]
        [--strategies sequential padoc ... (default: every strategy)] [--out runs/bench_latency]
    python experiments/bench_latency.py --replot --out DIR   # redraw the plot from DIR's JSON

Running time, measured on the 2-core CPU, shipped model, quiet machine, 128 pages at 1/4/16/64:
38 min for sequential, padoc, table_rows, crops, mtp, hpd (2275 s); the drafting strategies
cost about 4 min per level each more (the pipeline OCR's ~3.4 CPU-s per page, cold at every
level), so about 1h45 for the defaults. Writes bench_latency.json, bench_latency.png (pages/s
and the quantiles vs pages in flight) and report.html.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


QUANTILES = (50, 95, 99)


def plot(rows: list[dict], path: Path) -> Path:
    """Three panels against pages in flight: pages/s, latency end to end, decoding alone; one
    colour per strategy, solid P50 / dashed P95 / dotted P99."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["strategy"] for r in rows))
    colours = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharex=True)
    for name in names:
        mine = sorted((r for r in rows if r["strategy"] == name), key=lambda r: r["concurrency"])
        xs = [r["concurrency"] for r in mine]
        axes[0].plot(xs, [r["pages_per_s"] for r in mine], marker="o", color=colours[name], label=name)
        for ax, kind in zip(axes[1:], ("e2e", "decode")):
            for q, ls in zip(QUANTILES, ("-", "--", ":")):
                ax.plot(xs, [r[f"p{q}_{kind}_s"] for r in mine], ls=ls, marker="o", ms=3, color=colours[name])
    axes[0].set_ylabel("pages/s (end to end)")
    axes[0].set_title("throughput", fontsize=9)
    axes[0].legend(fontsize=7)
    for ax, title in zip(axes[1:], ("latency end to end (all pages submitted at once)", "latency of decoding alone")):
        ax.set_yscale("log")
        ax.set_ylabel("seconds per page (solid P50, dashed P95, dotted P99)")
        ax.set_title(title, fontsize=9)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("pages in flight")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="checkpoint folder; default the shipped model; 'random' for a smoke run")
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--strategies", nargs="+", default=["sequential", "padoc", "table_rows", "crops", "mtp", "hpd", "hsd",
                                                        "padoc_hsd:draft_workers=2"],
                    help="strategy names, optionally with options: name:key=value,... (as bench_engine.py)")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--replot", action="store_true", help="only redraw bench_latency.png from --out's bench_latency.json")
    ap.add_argument("--out", default="runs/bench_latency")
    args = ap.parse_args()
    if args.replot:
        print(plot(json.loads((Path(args.out) / "bench_latency.json").read_text())["rows"],
                   Path(args.out) / "bench_latency.png"))
        return

    import torch
    from omegaconf import OmegaConf

    from bench_engine import _strategy_cfg
    from treedec.run.passes import charge_write
    from treedec.data.synth import SynthConfig, generate_page
    from treedec.engine.engine import EngineConfig
    from treedec.models.loader import load_vlm
    from treedec.models.vlm import VLMSpec
    from treedec.report.html import write_report
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.run.stages import run_strategy
    from treedec.results.speed import level_row, measure_levels, page_latencies
    from treedec.strategies.base import build_strategy

    torch.set_num_threads(args.threads)
    vlm = load_vlm(OmegaConf.create({"name": "random" if args.model == "random" else "tiny",
                                     "path": None if args.model in (None, "random") else args.model,
                                     "spec": OmegaConf.structured(VLMSpec)}))
    t = time.perf_counter()
    samples = [generate_page(args.seed + i, SynthConfig(**vlm.pages)) for i in range(args.pages)]
    load_s = time.perf_counter() - t
    specs = [_strategy_cfg(spec) for spec in args.strategies]

    def decode(i: int, level: int, progress: bool):
        strategy = build_strategy(specs[i][0], vlm.tokenizer)
        ecfg = EngineConfig(max_pages=level, max_new_tokens=args.max_new_tokens, **specs[i][1])
        res = charge_write(run_strategy(EmbeddedRuntime(ecfg), vlm, strategy, samples, progress=False))  # cold drafts
        res.charge("load", load_s)  # every run loads its pages: each page waits for it
        res.strategy = args.strategies[i]
        return res

    t0 = time.perf_counter()
    _, results = measure_levels(decode, args.strategies, args.concurrency)
    rows = []
    for level, runs in sorted(results.items()):
        for res in runs:
            e2e, dec = page_latencies(res)
            lat = {"e2e": e2e, "decode": dec}
            # the run's speed figures (steps, rows per step, pages/s, phases per page), then the latency quantiles
            rows.append({**level_row(res, level), "drafts": res.drafts,
                         **{f"p{q}_{k}_s": float(np.percentile(v, q)) if v else None
                            for k, v in lat.items() for q in QUANTILES}})
    bench_s = time.perf_counter() - t0
    print(f"{'conc':>5} {'strategy':<32} {'steps':>6} {'pages/s':>8} " + " ".join(f"{'P' + str(q) + ' e2e':>9}" for q in QUANTILES)
          + " " + " ".join(f"{'P' + str(q) + ' dec':>9}" for q in QUANTILES))
    for r in rows:
        print(f"{r['concurrency']:>5} {r['strategy']:<32} {r['median_steps']:>6.1f} {r['pages_per_s']:>8.3f} "
              + " ".join(f"{r[f'p{q}_e2e_s']:>9.2f}" for q in QUANTILES) + " "
              + " ".join(f"{r[f'p{q}_decode_s']:>9.2f}" for q in QUANTILES))
    print(f"benchmark time {bench_s:.0f} s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_latency.json").write_text(json.dumps({"rows": rows, "bench_s": bench_s, "args": vars(args)},
                                                       indent=1))
    png = plot(rows, out / "bench_latency.png")
    write_report(out, {"model": args.model or "shipped", "pages": len(samples), "bench_s": bench_s}, {}, [png],
                 title="treedec bench_latency", tables={"Latency per page by concurrency": rows})
    print(f"wrote {out}/bench_latency.json, bench_latency.png, report.html")


if __name__ == "__main__":
    main()
