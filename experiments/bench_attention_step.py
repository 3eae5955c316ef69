"""One engine step, dense vs page-blocked attention (`runtime.attention`): the shipped
model's forward over P pages of S KV slots each, with R new rows per page, timed both ways
on the same cache. `auto` picks blocked from `blocked_rows` rows per page (EngineConfig).

    python experiments/bench_attention_step.py [--pages 16] [--slots 400] [--rows 1 4 16] [--reps 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--slots", type=int, default=400, help="KV slots per page already in the arena")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16], help="new rows per page in the step")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()

    import torch

    from treedec.engine.kv import arena_cache
    from treedec.models.attention import PageBatch
    from treedec.models.vlm import SHIPPED, VLM

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    vlm = VLM.load(SHIPPED)
    adapter = vlm.adapter()
    cfg = adapter.text_config
    P, S = args.pages, args.slots
    heads, dim = cfg.num_key_value_heads, cfg.head_dim
    cache = arena_cache()
    with torch.inference_mode():
        for layer in range(cfg.num_hidden_layers):  # every page's KV, page after page
            cache.update(torch.randn(1, heads, P * S, dim), torch.randn(1, heads, P * S, dim), layer)
    print(f"one step, {P} pages x {S} KV slots, shipped model ({cfg.num_hidden_layers} layers), "
          f"{torch.get_num_threads()} threads; median of {args.reps}")
    print(f"{'rows/page':>10}{'dense ms':>10}{'blocked ms':>12}{'max |dlogit|':>14}")
    for R in args.rows:
        n = P * R
        ids = torch.randint(10, len(vlm.tokenizer), (n,))
        pos = torch.arange(S, S + R).repeat(P)
        mask = torch.full((n, P * S + n), float("-inf"))
        groups = []
        for p in range(P):
            rows = slice(p * R, (p + 1) * R)
            mask[rows, p * S:(p + 1) * S] = 0.0
            mask[rows, P * S + p * R:P * S + (p + 1) * R] = torch.triu(torch.full((R, R), float("-inf")), 1)
            keys = torch.cat([torch.arange(p * S, (p + 1) * S), torch.arange(P * S + p * R, P * S + (p + 1) * R)])
            groups.append((torch.arange(p * R, (p + 1) * R), keys, mask[rows].index_select(1, keys)))
        times = {"dense": [], "blocked": []}
        out = {}
        for rep in range(args.reps + 2):
            for how in ("dense", "blocked"):
                t = time.perf_counter()
                pages = PageBatch.build(groups) if how == "blocked" else None
                out[how] = adapter.step(ids, pos, None if pages else mask, cache, pages=pages)
                if rep >= 2:
                    times[how].append(time.perf_counter() - t)
                for layer in cache.layers:  # drop the step's rows again
                    layer.size = P * S
                    layer._views()
        diff = (out["dense"] - out["blocked"]).abs().max().item()
        print(f"{R:>10}{1000 * statistics.median(times['dense']):>10.1f}"
              f"{1000 * statistics.median(times['blocked']):>12.1f}{diff:>14.2e}")


if __name__ == "__main__":
    main()
