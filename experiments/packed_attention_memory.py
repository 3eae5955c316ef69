"""Peak memory of one Qwen3-VL training step (forward + backward of the trainer's `PackedLM`)
over a packed PaDoc batch: the dense L x L ancestor mask (SDPA, the reference path of
`treedec.training.qwen3_vl_packing`) vs tree-varlen (`treedec.models.attention.tree_attention`),
at 1k-16k packed tokens, on a random Qwen3-VL with Qwen3-VL-2B's attention shape (16 heads,
8 kv heads, head dim 128, hidden 2048) and one decoder layer (`--layers`). For the tiny
Idefics3 model and timings see bench_tree_attention.py.

Pages are PaDoc trees shaped like a Qwen3-VL page (a 300-token prompt with the image, a layout
stream of 12 tokens per region, a 100-token content branch per region, 8 regions), packed until
the length is reached. Each measurement runs in a fresh process; its peak resident memory
(ru_maxrss) minus that of the same process after building the model and layout is reported. Memory, not
time: the figures do not depend on how loaded the machine is.

    python experiments/packed_attention_memory.py [--layers 1 --lengths 1024 2048 ...] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

LENGTHS = (1024, 2048, 4096, 8192, 16384)


def layout(total: int):
    from treedec.graph import DecodingGraph
    from treedec.training.packing import pack

    graphs, n = [], 0
    while n < total:
        g = DecodingGraph()
        g.root([0] * 300)
        for _ in range(8):
            g.append(0, [0] * 12)  # <BLOCK> category [box] <FORK>
            c = g.fork(0, len(g[0].tokens) - 1, [0])
            g.append(c.id, [0] * 100)
        g.append(0, [0])
        graphs.append(g)
        n += sum(len(s.tokens) - 1 for s in g.streams)
    tree = pack(graphs).tree
    # cut to `total` tokens: keep whole segments, then trim the last one
    from treedec.models.attention import Segment, TreeLayout

    segs = []
    for s in tree.segments:
        if s.start >= total:
            break
        segs.append(Segment(s.start, min(s.length, total - s.start), tuple((a, e) for a, e in s.prefix
                                                                            if a < len(segs))))
    return TreeLayout(tuple(segs))


def model(heads: int, kv_heads: int, dim: int, layers: int):
    """A random Qwen3-VL with Qwen3-VL-2B's text attention shape (hidden = heads x dim) and
    `layers` decoder layers; a small vocabulary and vision tower (no image in the batch)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    hidden = heads * dim
    text = dict(vocab_size=1024, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=dim, max_position_embeddings=65536,
                rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                                 "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=hidden,
                  deepstack_visual_indexes=[])
    return Qwen3VLForConditionalGeneration(Qwen3VLConfig(text_config=text, vision_config=vision)).train()


def measure(kind: str, L: int, heads: int, kv_heads: int, dim: int, layers: int) -> dict:
    """Peak memory of one forward + backward of `PackedLM` (the trainer's loss module) on L packed tokens."""
    import torch

    from treedec.training.qwen3_vl_packing import PackedLM

    torch.manual_seed(0)
    tree = layout(L)
    lm = PackedLM(model(heads, kv_heads, dim, layers), kind)
    ids = torch.randint(0, 1024, (L,))
    pos = torch.arange(L).view(1, 1, -1).expand(3, 1, -1)  # positions do not change memory
    mask = None
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if kind == "dense":  # built per batch, as the reference path does
        dense = tree.dense_mask()
        mask = torch.zeros(L, L).masked_fill_(~dense, float("-inf"))[None, None]
        del dense
    loss, _ = lm(ids, pos, ids, None, None, tree=tree if kind == "tree" else None, attention_mask=mask)
    loss.backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"kind": kind, "tokens": L, "peak_mib": round((peak - base) / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=16)  # Qwen3-VL-2B's text model: 16 heads, 8 kv heads, 128 dims
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--lengths", type=int, nargs="*", default=list(LENGTHS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: measure KIND L in this process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one[0], int(a.one[1]), a.heads, a.kv_heads, a.dim, a.layers)))
        return
    rows = []
    for L in a.lengths:
        for kind in ("dense", "tree"):
            r = subprocess.run([sys.executable, __file__, "--one", kind, str(L), "--heads", str(a.heads),
                                "--kv-heads", str(a.kv_heads), "--dim", str(a.dim), "--layers", str(a.layers)], capture_output=True, text=True)
            row = json.loads(r.stdout) if r.returncode == 0 else {"kind": kind, "tokens": L, "error": r.stderr[-300:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"heads": a.heads, "kv_heads": a.kv_heads, "dim": a.dim, "layers": a.layers, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
