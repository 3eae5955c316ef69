"""When does speculation pay? A PROJECTION from measured parts, not a measurement of pages/s.

Measured here: one engine step's time (`CausalLMAdapter.step` on a KV arena, page-blocked
attention as the engine runs it) for random-weight models of the shipped architecture
(Llama text decoder of the tiny Idefics3, head_dim 64, MLP 4x) scaled to about 5M, 50M,
300M and 1B parameters, as a function of the rows in the step and the KV length per page.
Measured elsewhere, read from a benchmark's JSON (`experiments/bench_latency.py` or `bench_engine.py`
on the trained model, cold drafts): per strategy the mean critical-path steps per page (the
median in files older than mean_steps), the rows a page puts in a step (`rows_per_step`: streams + draft nodes) and the drafting
seconds per page (drafted in worker processes: their CPU seconds, `draft_cpu_s`; drafted
first: `phases_per_page_s` draft; stage 1 is model steps, already in the steps).

Projection, per strategy s and model size m, C pages in flight:
    step(m, rows, kv)  interpolated from the measured grid (linear in rows and kv)
    decode s/page     = steps_s * step(m, C * rows_s, kv) / C
    pages/s           = 1 / (decode s/page + draft s/page)   (drafting before decoding, as today)
    pages/s pipelined = 1 / max(decode s/page, draft s/page)  (drafting concurrent, separate cores)
Each run's own check of a cost model against its measured pages/s is `projected_pages_per_s`
in its summary.json (treedec/cost_model.py: prefills, crops, stage 1 and the engine's own time
included); this script projects across sizes and leaves those out.
It assumes: accepted lengths and steps do not change with model size (a larger model that
reads better would accept more), drafting cost does not depend on the model, the step
time of C pages at the page's mean rows stands for the real mix, no prefill cost (one
forward per page, small against its steps), and the same hardware and threads as measured.
The break-even size is the smallest measured size at which a strategy's projected pages/s
beats the reference strategy's (default padoc).

    python experiments/cost_model.py --bench runs/bench_latency/bench_latency.json [more.json ...] [--sizes 5M 50M 300M 1B]
        [--rows 16 64 256] [--kv 300 1000] [--concurrency 16] [--out runs/cost_model]

Writes cost_model.json, cost_model.png and prints the table. About 1 minute per size up
to 300M on 2 cores, several for 1B (4 GB of fp32 weights); run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


SIZES = {"5M": (256, 4), "50M": (512, 12), "300M": (1024, 18), "1B": (2048, 15)}  # text hidden, layers


def build(hidden: int, layers: int):
    """A random-weight text decoder of the shipped architecture at this size, as an adapter."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from treedec.models.adapter import CausalLMAdapter
    from treedec.models.tiny import tiny_idefics3_config

    text = tiny_idefics3_config(text_hidden=hidden, text_layers=layers).text_config.to_dict()
    cfg = LlamaConfig(**{k: v for k, v in text.items() if k in LlamaConfig().to_dict() or k == "head_dim"})
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
        model.model.rotary_emb.__init__(model.config)  # buffers made on meta: rebuild
    n = sum(p.numel() for p in model.parameters())
    return CausalLMAdapter(model), n


def step_seconds(adapter, rows: int, kv: int, pages: int, reps: int) -> float:
    """Median seconds of one step: `pages` pages of `kv` KV slots each, `rows` rows in all."""
    import torch

    from bench_attention_step import random_arena
    from treedec.engine.step_attention import Span, page_batch, page_slots

    cfg = adapter.text_config
    per = max(1, rows // pages)
    owner = [p for p in range(pages) for _ in range(kv)]
    base = len(owner)
    cache = random_arena(cfg, base)
    slots = page_slots(owner, base)
    spans = [Span(p, p * per, per, None, slots[p]) for p in range(pages)]
    n = pages * per
    ids = torch.randint(10, cfg.vocab_size, (n,))
    pos = torch.arange(kv, kv + per).repeat(pages)
    keep = torch.arange(n)
    times = []
    for rep in range(reps + 1):
        t = time.perf_counter()
        adapter.step(ids, pos, None, cache, keep=keep, pages=page_batch(spans, slots, base))
        if rep:
            times.append(time.perf_counter() - t)
        for layer in cache.layers:
            layer.size = base
            layer._views()
    return statistics.median(times)


def interp(grid: dict, rows: float, kv: float) -> float:
    """Bilinear interpolation (linear extrapolation outside) of {(rows, kv): seconds}."""
    rs, ks = sorted({r for r, _ in grid}), sorted({k for _, k in grid})

    def lin(xs, x):
        if len(xs) == 1:
            return xs[0], xs[0], 0.0
        i = max(0, min(len(xs) - 2, sum(v <= x for v in xs) - 1))
        a, b = xs[i], xs[i + 1]
        return a, b, (x - a) / (b - a)

    r0, r1, fr = lin(rs, rows)
    k0, k1, fk = lin(ks, kv)
    at = lambda r, k: grid[(r, k)]  # noqa: E731
    return ((1 - fr) * ((1 - fk) * at(r0, k0) + fk * at(r0, k1)) + fr * ((1 - fk) * at(r1, k0) + fk * at(r1, k1)))


def strategies_from(benches: list[Path], concurrency: int | None) -> dict[str, dict]:
    """Per strategy: steps, rows per step, draft s per page, from bench_engine.json or
    bench_latency.json files (one level; a strategy in several files: the first file's)."""
    rows = [r for bench in benches for r in json.loads(bench.read_text())["rows"]]
    level = concurrency or max(r["concurrency"] for r in rows)
    out = {}
    for r in rows:
        if r["concurrency"] == level and r["strategy"] not in out:
            ph = r.get("phases_per_page_s") or {}
            # drafting's cost per page: where pages were drafted in worker processes, the workers'
            # CPU seconds (the run's phase "draft" is then only the engine's wait); else the phase
            cpu = r.get("draft_cpu_s")
            # throughput follows the mean steps, not the median (issue 32.4); older files without it: the median
            out[r["strategy"]] = {"steps": r.get("mean_steps") or r["median_steps"],
                                  "rows_per_step": r.get("rows_per_step") or 1.0,
                                  "draft_s": cpu / r["pages"] if cpu else ph.get("draft", 0.0),
                                  "draft_s_from": "worker CPU s" if cpu else "phase draft",
                                  "measured_pages_per_s": r.get("pages_per_s"), "concurrency": level}
    if not out:
        raise SystemExit(f"{' '.join(map(str, benches))}: no rows at concurrency {level}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", type=Path, nargs="+", required=True,
                    help="bench_engine.json / bench_latency.json files with the strategies' measured figures")
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), help=f"of {list(SIZES)} or HIDDENxLAYERS")
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 64, 256], help="rows per step measured")
    ap.add_argument("--kv", type=int, nargs="+", default=[300, 1000], help="KV slots per page measured")
    ap.add_argument("--pages", type=int, default=16, help="pages the measured steps' rows are spread over")
    ap.add_argument("--concurrency", type=int, default=None, help="bench level to read (default its largest)")
    ap.add_argument("--reference", default="padoc", help="break-even against this strategy")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("runs/cost_model"))
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    strategies = strategies_from(args.bench, args.concurrency)
    sizes = []
    for name in args.sizes:
        hidden, layers = SIZES[name] if name in SIZES else map(int, name.lower().split("x"))
        adapter, params = build(hidden, layers)
        grid = {(r, k): step_seconds(adapter, r, k, args.pages, args.reps) for r in args.rows for k in args.kv}
        sizes.append({"size": name, "params": params, "hidden": hidden, "layers": layers,
                      "step_s": {f"{r}x{k}": v for (r, k), v in grid.items()}, "grid": grid})
        print(f"{name}: {params / 1e6:.1f}M params; step s " + ", ".join(f"{r} rows x {k} kv {v:.4f}"
                                                                           for (r, k), v in grid.items()))
        del adapter
    kv = statistics.mean(args.kv)
    table = []
    for sz in sizes:
        for name, s in strategies.items():
            C = s["concurrency"]
            decode = s["steps"] * interp(sz["grid"], C * s["rows_per_step"], kv) / C
            table.append({"size": sz["size"], "params": sz["params"], "strategy": name,
                          "decode_s_per_page": decode, "draft_s_per_page": s["draft_s"],
                          "pages_per_s": 1 / (decode + s["draft_s"]),
                          "pages_per_s_pipelined": 1 / max(decode, s["draft_s"], 1e-12)})
    breakeven = {}
    for name in strategies:
        if name == args.reference:
            continue
        for key in ("pages_per_s", "pages_per_s_pipelined"):
            wins = [t["params"] for t in table if t["strategy"] == name and t[key] > next(
                (u[key] for u in table if u["size"] == t["size"] and u["strategy"] == args.reference), float("inf"))]
            breakeven.setdefault(name, {})[key] = min(wins) if wins else None
    print("\nPROJECTION (measured step times x measured steps, rows and draft costs; see the assumptions):")
    print(f"{'size':>6} {'strategy':<28} {'decode s/page':>13} {'draft s/page':>12} {'pages/s':>8} {'pipelined':>9}")
    for t in table:
        print(f"{t['size']:>6} {t['strategy']:<28} {t['decode_s_per_page']:>13.4f} {t['draft_s_per_page']:>12.4f} "
              f"{t['pages_per_s']:>8.3f} {t['pages_per_s_pipelined']:>9.3f}")
    print(f"break-even params against {args.reference} (None: not within the sizes measured): {breakeven}")
    args.out.mkdir(parents=True, exist_ok=True)
    for sz in sizes:
        sz.pop("grid")
    (args.out / "cost_model.json").write_text(json.dumps(
        {"projection": True, "assumptions": __doc__.split("It assumes:")[1].split("The break-even")[0].strip(),
         "sizes": sizes, "strategies": strategies, "table": table, "breakeven_params": breakeven,
         "args": {k: str(v) for k, v in vars(args).items()}}, indent=1))
    plot(table, args.out / "cost_model.png")
    print(f"wrote {args.out}/cost_model.json, cost_model.png")


def plot(table: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name in dict.fromkeys(t["strategy"] for t in table):
        pts = sorted((t["params"], t["pages_per_s"], t["pages_per_s_pipelined"]) for t in table if t["strategy"] == name)
        line, = ax.plot([p for p, _, _ in pts], [v for _, v, _ in pts], marker="o", label=name)
        ax.plot([p for p, _, _ in pts], [v for _, _, v in pts], ls="--", color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("model parameters (random weights, shipped architecture scaled)")
    ax.set_ylabel("projected pages/s (dashed: drafting pipelined)")
    ax.set_title("PROJECTION from measured step times, steps and draft costs", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
