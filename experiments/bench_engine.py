"""Embedded-engine benchmark: sequential vs padoc (and any other strategies) on the same
checkpoint and pages, at several concurrency levels, in one process; plus the engine
running one stream vs plain greedy decoding of the same model (HF forward + DynamicCache).

    python experiments/bench_engine.py [--model PATH|random] [--pages 32] [--concurrency 1 4 16 64]
        [--strategies sequential padoc] [--out runs/bench_engine]

Figures are ratios against the sequential baseline measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.models.vlm import VLMSpec, load_vlm
from treedec.runner import parse_pages
from treedec.strategies.base import build_strategy


def plain_greedy(vlm, prompt, max_new: int) -> tuple[list[int], float]:
    """Reference decoding: prefill, then one token per forward with HF's own cache."""
    from transformers import DynamicCache

    model, tok = vlm.model, vlm.tokenizer
    t = time.perf_counter()
    with torch.inference_mode():
        cache = DynamicCache(config=model.config.text_config)
        ids = torch.tensor([prompt.ids])
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **prompt.inputs)
        new = []
        for _ in range(max_new):
            nxt = int(out.logits[0, -1].argmax())
            new.append(nxt)
            if nxt == tok.eos_id:
                break
            out = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True)
    return new, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint folder; default the shipped model; 'random' for a smoke run")
    ap.add_argument("--pages", type=int, default=32)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--strategies", nargs="+", default=["sequential", "padoc"])
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--out", default="runs/bench_engine")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model_cfg = OmegaConf.create({"name": "random" if args.model == "random" else "tiny",
                                  "path": None if args.model in (None, "random") else args.model,
                                  "spec": OmegaConf.structured(VLMSpec)})
    vlm = load_vlm(model_cfg)
    size = vlm.spec.image_size
    samples = [generate_page(args.seed + i, SynthConfig(width=size, height=size)) for i in range(args.pages)]
    rows = []
    for conc in args.concurrency:
        ecfg = EngineConfig(max_pages=conc, max_new_tokens=args.max_new_tokens)
        for name in args.strategies:
            res = parse_pages(vlm, build_strategy({"name": name}, vlm.tokenizer), samples, ecfg, progress=False)
            steps = [r.steps for r in res.records]
            lat = [r.latency_s for r in res.records]
            rows.append({"concurrency": conc, "strategy": name, "median_steps": float(np.median(steps)),
                         "pages_per_s": len(samples) / res.wall_s, "p95_latency_s": float(np.percentile(lat, 95)),
                         "tokens": sum(r.generated for r in res.records), "wall_s": res.wall_s})
            print(json.dumps(rows[-1]), flush=True)
    base = {r["concurrency"]: r for r in rows if r["strategy"] == args.strategies[0]}
    for r in rows:
        b = base[r["concurrency"]]
        r["steps_ratio"] = b["median_steps"] / r["median_steps"]
        r["throughput_ratio"] = r["pages_per_s"] / b["pages_per_s"]
        r["p95_ratio"] = b["p95_latency_s"] / r["p95_latency_s"]
    # one stream: the engine vs plain decoding, same pages, same token counts
    eng_s = plain_s = 0.0
    same = True
    seq = build_strategy({"name": "sequential"}, vlm.tokenizer)
    for s in samples[: min(8, len(samples))]:
        prompt = vlm.prompt(s.image, seq.mode)
        ref, dt = plain_greedy(vlm, prompt, args.max_new_tokens)
        plain_s += dt
        res = parse_pages(vlm, seq, [s], EngineConfig(max_pages=1, max_new_tokens=args.max_new_tokens),
                          progress=False, warmup=False)
        eng_s += res.wall_s
        ours = vlm.tokenizer.encode(res.records[0].text)
        same &= ours == ref[: len(ours)]
    one = {"engine_s": eng_s, "plain_s": plain_s, "engine_over_plain": eng_s / plain_s, "same_tokens": same}
    print(f"\n{'conc':>5} {'strategy':<12} {'steps':>7} {'pages/s':>8} {'p95 s':>7} {'steps x':>8} {'thru x':>7} {'p95 x':>6}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['strategy']:<12} {r['median_steps']:>7.0f} {r['pages_per_s']:>8.3f} "
              f"{r['p95_latency_s']:>7.2f} {r['steps_ratio']:>7.2f}x {r['throughput_ratio']:>6.2f}x {r['p95_ratio']:>5.2f}x")
    print(f"one stream: engine {eng_s:.2f}s vs plain {plain_s:.2f}s -> {one['engine_over_plain']:.2f}x, same tokens: {same}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_engine.json").write_text(json.dumps({"rows": rows, "one_stream": one, "args": vars(args)}, indent=1))
    _plot(rows, args.strategies, out / "bench_engine.png")


def _plot(rows, strategies, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name in strategies:
        rs = [r for r in rows if r["strategy"] == name]
        a.plot([r["concurrency"] for r in rs], [r["pages_per_s"] for r in rs], "o-", label=name)
        b.plot([r["concurrency"] for r in rs], [r["p95_latency_s"] for r in rs], "o-", label=name)
    for ax, lab in ((a, "pages/s"), (b, "P95 latency (s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent pages")
        ax.set_ylabel(lab)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
