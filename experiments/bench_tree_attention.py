"""Tree-varlen vs dense-mask training step: time and peak memory at 1k-8k tokens.

A page-like tree per size: a 256-token prompt, a layout stream, and content branches of
~64 tokens forking from it; packed to the target length. Each (size, path) runs in a
fresh subprocess so peak RSS is its own. Forward + backward of a small Llama, float32.

    python experiments/bench_tree_attention.py            # prints a table, writes runs/bench_tree_attention.json
"""
from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

SIZES = [1024, 2048, 4096, 8192]


def build(total: int, seed: int = 0):
    from treedec.graph import DecodingGraph

    rng = random.Random(seed)
    g = DecodingGraph()
    g.root([rng.randrange(100) for _ in range(256)])
    used = 256
    while used < total - 100:
        g.append(0, [rng.randrange(100) for _ in range(12)])  # a block's layout
        child = g.fork(0, len(g[0].tokens) - 1, [1])
        n = rng.randint(32, 96)
        g.append(child.id, [rng.randrange(100) for _ in range(n)])
        used += 12 + n + 1
    for s in g.streams:
        g.append(s.id, [2])
    return g


def measure(total: int, path: str, repeats: int) -> dict:
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM

    from treedec.models.attention import register
    from treedec.training.packing import IGNORE, pack

    torch.set_num_threads(2)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                      num_attention_heads=4, head_dim=64, max_position_embeddings=16384)
    cfg._attn_implementation = register() if path == "tree" else "sdpa"
    model = LlamaForCausalLM(cfg)
    packed = pack([build(total)])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        kw = dict(input_ids=packed.ids[None], position_ids=packed.positions[None])
        if path == "tree":
            logits = model(**kw, tree=packed.tree).logits[0]
        else:
            dense = packed.tree.dense_mask()
            mask = torch.zeros(dense.shape).masked_fill(~dense, float("-inf"))
            logits = model(**kw, attention_mask=mask[None, None]).logits[0]
        F.cross_entropy(logits, packed.labels, ignore_index=IGNORE).backward()
        model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"tokens": packed.tree.total, "path": path, "s_per_step": min(times),
            "peak_rss_mb": peak / 1024, "step_rss_mb": (peak - base) / 1024}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))))
        return
    rows = []
    for total in SIZES:
        for path in ("dense", "tree"):
            r = subprocess.run([sys.executable, __file__, "--one", str(total), path, "3"],
                               capture_output=True, text=True, check=True)
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    print(f"\n{'tokens':>7} {'dense s':>8} {'tree s':>8} {'speed-up':>9} {'dense MB':>9} {'tree MB':>8}")
    for d, t in zip(rows[0::2], rows[1::2]):
        print(f"{d['tokens']:>7} {d['s_per_step']:>8.3f} {t['s_per_step']:>8.3f} {d['s_per_step'] / t['s_per_step']:>8.2f}x "
              f"{d['step_rss_mb']:>9.0f} {t['step_rss_mb']:>8.0f}")
    out = Path("runs/bench_tree_attention.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
