"""Same checkpoint, same pages, greedy: runtime=embedded vs runtime=vllm, for sequential and
padoc, at a few concurrency levels; pages/s, tokens/s, median steps, P95 latency, whether
the pages agree, and ratios measured in the same run (a benchmark, not a test).

    python experiments/bench_runtimes.py --model tests/assets/vllm_tiny --pages 16 --concurrency 1 16

Pages are synthetic (`--page` takes SynthConfig overrides as JSON; the default is the page
generator of tests/assets/make_vllm_fixture.py, sized to the checkpoint's images).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np



def figures(res) -> dict:
    recs = [r for r in res.records if r.steps]
    gen = sum(r.generated for r in recs)
    return {"pages_per_s": len(recs) / res.wall_s, "tokens_per_s": gen / res.wall_s,
            "median_steps": float(np.median([r.steps for r in recs])),
            "p95_latency_s": float(np.percentile([r.latency_s for r in recs], 95)), "generated_tokens": gen,
            "streams": sum(r.streams for r in recs), "wall_s": res.wall_s, "forward_passes": res.forward_passes}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="checkpoint folder (VLM.save)")
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--page", default=None, help="SynthConfig overrides, JSON")
    ap.add_argument("--strategies", nargs="+", default=["sequential", "padoc"])
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    ap.add_argument("--max-new", type=int, default=160)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)

    import torch

    from treedec.data.synth import SynthConfig, generate_page
    from treedec.engine.engine import EngineConfig
    from treedec.models.vlm import VLM
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.engine import VLLMEngines
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(args.threads)
    vlm = VLM.load(args.model)
    size = vlm.spec.image_size
    page = dict(width=size, height=size, cell=(8, 8), margin=1, regions=(2, 3), para_words=(2, 6), furniture_prob=0.0,
                kinds={"text_block": 0.5, "title": 0.3, "equation_isolated": 0.2})
    page.update(json.loads(args.page) if args.page else {})
    samples = [generate_page(args.seed + i, SynthConfig(**page)) for i in range(args.pages)]
    rows = []
    t_start = time.perf_counter()
    engines = VLLMEngines()  # one engine per engine config, shared by every level and strategy
    for name in args.strategies:
        strategy = STRATEGIES.get(name)(vlm.tokenizer)
        for c in args.concurrency:
            with torch.inference_mode():  # the KV arena (027c611) fails to grow outside it between pages
                embedded = EmbeddedRuntime(EngineConfig(max_pages=c, max_new_tokens=args.max_new))
                emb = run_strategy(embedded, vlm, strategy, samples, progress=False)
            vll = VLLMRuntime(VLLMConfig(max_pages=c, max_new_tokens=args.max_new, max_num_batched_tokens=8192,
                                         threads=args.threads), args.model, engines).run(vlm, strategy, samples,
                                                                                        progress=False)
            same = sum(a.text == b.text for a, b in zip(emb.records, vll.records))
            same_steps = sum(a.steps == b.steps for a, b in zip(emb.records, vll.records))
            fe, fv = figures(emb), figures(vll)
            cache = vll.attention  # the vLLM runtime's run figures (VLLMRuntime.figures)
            rows.append({"strategy": name, "concurrency": c, "pages": len(samples), "same_pages": same,
                         "same_steps": same_steps, "embedded": fe, "vllm": fv,
                         "vllm_over_embedded_pages_per_s": fv["pages_per_s"] / fe["pages_per_s"],
                         "vllm_prefix_cache_hit": cache.get("prefix_cache_cached_tokens", 0)
                         / max(1, cache.get("prefix_cache_prompt_tokens", 0))})
            r = rows[-1]
            print(f"{name:<10} c={c:<3} same pages {same}/{len(samples)} same steps {same_steps}/{len(samples)} | "
                  f"embedded {fe['pages_per_s']:.3f} p/s {fe['tokens_per_s']:.1f} tok/s | "
                  f"vllm {fv['pages_per_s']:.3f} p/s {fv['tokens_per_s']:.1f} tok/s | "
                  f"vllm/embedded {r['vllm_over_embedded_pages_per_s']:.2f}x | "
                  f"median steps {fe['median_steps']:.0f}/{fv['median_steps']:.0f} | "
                  f"prefix-cache hit {r['vllm_prefix_cache_hit']:.2f}", flush=True)
    engines.close()
    base = {(r["concurrency"], "embedded"): r["embedded"]["pages_per_s"] for r in rows if r["strategy"] == "sequential"}
    base.update({(r["concurrency"], "vllm"): r["vllm"]["pages_per_s"] for r in rows if r["strategy"] == "sequential"})
    for r in rows:
        for rt in ("embedded", "vllm"):
            b = base.get((r["concurrency"], rt))
            r[rt]["throughput_ratio_vs_sequential"] = r[rt]["pages_per_s"] / b if b else None
    out = {"model": args.model, "pages": args.pages, "max_new_tokens": args.max_new, "threads": args.threads,
           "rows": rows, "wall_s": time.perf_counter() - t_start}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
