"""Peak memory of one attention forward + backward over a packed PaDoc batch: the dense L x L
ancestor mask (SDPA, the reference path of `treedec.training.qwen3_vl_packing`) vs tree-varlen
(`treedec.models.attention.tree_attention`), at 1k-16k packed tokens.

Pages are PaDoc trees shaped like a Qwen3-VL page (a 300-token prompt with the image, a layout
stream of 12 tokens per region, a 100-token content branch per region, 8 regions), packed until
the length is reached. Each measurement runs in a fresh process; its peak resident memory
(ru_maxrss) minus that of the same process before the attention call is reported. Memory, not
time: the figures do not depend on how loaded the machine is.

    python experiments/packed_attention_memory.py [--heads 16 --kv-heads 8 --dim 128] [--out FILE]
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


def measure(kind: str, L: int, heads: int, kv_heads: int, dim: int) -> dict:
    import torch

    from treedec.models.attention import tree_attention

    torch.manual_seed(0)
    tree = layout(L)
    q = torch.randn(1, heads, L, dim, requires_grad=True)
    k = torch.randn(1, kv_heads, L, dim, requires_grad=True)
    v = torch.randn(1, kv_heads, L, dim, requires_grad=True)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if kind == "tree":
        out = tree_attention(q, k, v, tree, dim ** -0.5)
    else:
        dense = tree.dense_mask()
        mask = torch.zeros(L, L).masked_fill_(~dense, float("-inf"))[None, None]
        del dense
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads)
    out.sum().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"kind": kind, "tokens": L, "peak_mib": round((peak - base) / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=16)  # Qwen3-VL-2B's text model: 16 heads, 8 kv heads, 128 dims
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--lengths", type=int, nargs="*", default=list(LENGTHS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: measure KIND L in this process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one[0], int(a.one[1]), a.heads, a.kv_heads, a.dim)))
        return
    rows = []
    for L in a.lengths:
        for kind in ("dense", "tree"):
            r = subprocess.run([sys.executable, __file__, "--one", kind, str(L), "--heads", str(a.heads),
                                "--kv-heads", str(a.kv_heads), "--dim", str(a.dim)], capture_output=True, text=True)
            row = json.loads(r.stdout) if r.returncode == 0 else {"kind": kind, "tokens": L, "error": r.stderr[-300:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"heads": a.heads, "kv_heads": a.kv_heads, "dim": a.dim, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
