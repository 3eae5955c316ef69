"""One engine step with P pages in flight, each attention layout (`runtime.attention`):
dense (one mask over the whole arena), padded (page-blocked, one batch padded to the
step's largest page: the former `blocked`) and bucketed (page-blocked, buckets of similar
rows and keys: today's `blocked`). The shipped model's forward on the same cache, the
mask or page batch built by the engine's own code (treedec.engine.step_attention), and
the padding waste of each layout (score elements handed to the kernels / real ones).

The step mixes what a real step holds: most pages decode (1-3 rows: streams), a few carry
draft trees (`--draft-rows`), one page is new (short KV) and one long; KV slots are laid
out as the engine does (each page's prompt contiguous, decoded tokens interleaved).

    python experiments/bench_attention_step.py [--pages 16 64] [--reps 10]

Prints a table; timings need a quiet machine (about 1 min per page count at 2 threads).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time


LAYOUTS = ("dense", "padded", "bucketed")


def random_arena(cfg, slots: int):
    """A KV arena holding `slots` random K/V rows in every layer of a model with text config `cfg`."""
    import torch

    from treedec.engine.kv import arena_cache

    cache = arena_cache()
    with torch.inference_mode():
        for layer in range(cfg.num_hidden_layers):
            cache.update(torch.randn(1, cfg.num_key_value_heads, slots, cfg.head_dim),
                         torch.randn(1, cfg.num_key_value_heads, slots, cfg.head_dim), layer)
    return cache


def make_step(P: int, prompt: int, seed: int, draft_rows: int):
    """Spans and arena owners of one step with P pages (see the module's docstring)."""
    import torch

    from treedec.engine.draft import DraftTree
    from treedec.engine.step_attention import Span

    rng = random.Random(seed)
    decoded = [rng.randint(20, 400) for _ in range(P)]
    decoded[0], decoded[-1] = 1, 900  # a page just admitted, a long one
    owner: list[int] = []
    for p in range(P):
        owner += [p] * prompt
    for t in range(max(decoded)):  # decode steps append every live page's tokens in turn
        owner += [p for p in range(P) if t < decoded[p]]
    spans, row = [], 0
    for p in range(P):
        slots = torch.tensor([i for i, o in enumerate(owner) if o == p])
        streams = rng.choice([1, 1, 2, 3])
        for s in range(streams):
            tree = DraftTree.chain(list(range(10, 10 + draft_rows))) if p % 8 == 1 and s == 0 else None
            vis = slots if s == 0 else slots[:prompt + len(slots) // 2 - prompt // 2]  # a branch sees a prefix
            spans.append(Span(p, row, 1, tree, vis))
            row += spans[-1].rows
    return spans, owner, row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--prompt", type=int, default=270, help="prompt slots per page (image + instruction)")
    ap.add_argument("--draft-rows", type=int, default=15, help="draft nodes on one stream of every 8th page")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()

    import torch

    from treedec.engine.step_attention import dense_mask, page_batch, page_sizes, page_slots
    from treedec.models.vlm import SHIPPED, VLM

    torch.set_num_threads(args.threads)
    adapter = VLM.load(SHIPPED).adapter()
    cfg = adapter.text_config
    print(f"one step, shipped model ({cfg.num_hidden_layers} layers), {args.threads} threads, median of {args.reps}; "
          f"waste = score elements handed to the kernels / real ones (each page's rows x its own keys)")
    print(f"{'pages':>6}{'rows':>6}{'arena':>7}{'layout':>10}{'buckets':>8}{'waste':>8}{'ms':>9}{'max |dlogit|':>14}")
    for P in args.pages:
        spans, owner, n = make_step(P, args.prompt, P, args.draft_rows)
        base = len(owner)
        cache = random_arena(cfg, base)
        ids = torch.randint(10, cfg.vocab_size, (n,))
        pos = torch.randint(args.prompt, args.prompt + 400, (n,))
        owned = page_slots(owner, base)
        real = sum(r * k for r, k in page_sizes(spans, owned))
        ref = None
        for how in args.layouts:
            times = []
            for rep in range(args.reps + 1):
                t = time.perf_counter()
                owned = page_slots(owner, base)
                if how == "dense":
                    pages, mask = None, dense_mask(spans, base, n)
                    padded, buckets = n * (base + n), 0
                else:
                    pages, mask = page_batch(spans, owned, base, 0.0 if how == "padded" else 0.5), None
                    padded, buckets = pages.padded, len(pages.buckets)
                out = adapter.step(ids, pos, mask, cache, pages=pages)
                if rep:
                    times.append(time.perf_counter() - t)
                for layer in cache.layers:  # drop the step's rows again
                    layer.size = base
                    layer._views()
            ref = out if ref is None else ref
            print(f"{P:>6}{n:>6}{base:>7}{how:>10}{buckets:>8}{padded / real:>8.2f}"
                  f"{1000 * statistics.median(times):>9.1f}{(out - ref).abs().max().item():>14.2e}")


if __name__ == "__main__":
    main()
