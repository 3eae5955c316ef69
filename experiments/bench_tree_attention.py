"""Tree-varlen vs dense-mask training step: time and peak memory at 1k-8k tokens.

A page-like tree per size: a 256-token prompt, a layout stream, and content branches of
~64 tokens forking from it; packed to the target length. Each (size, path) runs in a
fresh subprocess so peak RSS is its own. Forward + backward of a small Llama (4 layers,
hidden 256, 4 heads of 64), float32 (or bf16 autocast with --bf16, as the trainer runs).

Fairness: both paths build their attention structure from the packed `TreeLayout` inside
the timed step, as a trainer does per batch -- the dense path its L x L float mask, the
tree path its plan (a fresh layout each step, so nothing is cached across steps); the
time of that build is also reported on its own (`build_s`). Time = the fastest of
`--repeats` steps in one process (the first includes warm-up); with `--rounds N` the
whole sweep is repeated, paths interleaved, and the fastest round is kept, which is what
to use when other jobs share the CPUs. Step RSS = peak RSS of the process minus its RSS
after building the model (or q, k, v) and the packed batch. `--what attention` times one
attention call alone, where the dense mask's L^2 memory is not hidden by the model's
activations.

    python experiments/bench_tree_attention.py            # table; runs/bench_tree_attention.{json,png}
    python experiments/bench_tree_attention.py --rounds 3 --threads 2 --sizes 1024 2048 4096 8192
    python experiments/bench_tree_attention.py --what attention --out runs/bench_tree_attention_layer  # attention alone
"""
from __future__ import annotations

import argparse
import json
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

SIZES = [1024, 2048, 4096, 8192]
PATHS = ("dense", "tree")


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


def measure(total: int, path: str, repeats: int, threads: int, bf16: bool, what: str) -> dict:
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM

    from treedec.models.attention import TreeLayout, register, tree_attention
    from treedec.training.packing import IGNORE, pack

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    packed = pack([build(total)])
    if what == "attention":  # one attention call (4 heads of 64) alone: q, k, v -> out, backward
        L = packed.tree.total
        q, k, v = (torch.randn(1, L, 4, 64).transpose(1, 2).requires_grad_() for _ in range(3))
        do = torch.randn(1, L, 4, 64)
    else:
        cfg = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                          num_attention_heads=4, head_dim=64, max_position_embeddings=16384)
        cfg._attn_implementation = register() if path == "tree" else "sdpa"
        model = LlamaForCausalLM(cfg)
        kw = dict(input_ids=packed.ids[None], position_ids=packed.positions[None])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    steps = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        if path == "tree":
            tree = TreeLayout(packed.tree.segments)  # fresh: its plan is built in this step
            tree.plan()
            extra = dict(tree=tree)
        else:
            dense = packed.tree.dense_mask()
            mask = torch.zeros(dense.shape).masked_fill(~dense, float("-inf"))
            extra = dict(attention_mask=mask[None, None])
        t1 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if what == "attention":
                if path == "tree":
                    out = tree_attention(q, k, v, extra["tree"], 0.125)
                else:
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=extra["attention_mask"]).transpose(1, 2)
                loss = (out.float() * do).sum()
            else:
                logits = model(**kw, **extra).logits[0]
                loss = F.cross_entropy(logits.float(), packed.labels, ignore_index=IGNORE)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        if what == "attention":
            q.grad = k.grad = v.grad = None
        else:
            model.zero_grad(set_to_none=True)
        del extra, loss
        steps.append({"build_s": t1 - t0, "fwd_s": t2 - t1, "bwd_s": t3 - t2, "s_per_step": t3 - t0})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best = min(steps, key=lambda s: s["s_per_step"])
    return {"tokens": packed.tree.total, "path": path, **best, "steps": [s["s_per_step"] for s in steps],
            "peak_rss_mb": peak / 1024, "step_rss_mb": (peak - base) / 1024, "threads": threads, "bf16": bf16,
            "what": what}


def run_one(total: int, path: str, args) -> dict:
    cmd = [sys.executable, __file__, "--one", str(total), path, "--repeats", str(args.repeats),
           "--threads", str(args.threads), "--what", args.what] + (["--bf16"] if args.bf16 else [])
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """Log-log slope of ys against xs (1 = linear growth, 2 = quadratic)."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def plot(best: dict, sizes: list[int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for p, style in zip(PATHS, ("o-", "s-")):
        rows = [best[(n, p)] for n in sizes]
        x = [r["tokens"] for r in rows]
        ax1.plot(x, [r["s_per_step"] for r in rows], style, label=f"{p} (fwd+bwd)")
        ax2.plot(x, [r["step_rss_mb"] for r in rows], style, label=p)
    for ax, ylabel in ((ax1, "seconds per step"), (ax2, "step peak RSS (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax1.set_title("time")
    ax2.set_title("memory")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=2, metavar=("TOKENS", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--repeats", type=int, default=3, help="steps per process (the fastest counts)")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the sweep; keep each cell's fastest round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast, as the trainer runs")
    ap.add_argument("--what", choices=("model", "attention"), default="model",
                    help="model: the small Llama's step; attention: one attention call (4 x 64 heads) alone")
    ap.add_argument("--out", default="runs/bench_tree_attention")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.repeats, args.threads, args.bf16, args.what)))
        return
    best: dict[tuple[int, str], dict] = {}
    runs = []
    for rnd in range(args.rounds):
        for total in args.sizes:
            for path in PATHS if rnd % 2 == 0 else PATHS[::-1]:  # alternate the order between rounds
                r = run_one(total, path, args)
                r["round"] = rnd
                runs.append(r)
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
                key = (total, path)
                if key not in best or r["s_per_step"] < best[key]["s_per_step"]:
                    best[key] = {**r, "step_rss_mb": min(r["step_rss_mb"], best.get(key, r)["step_rss_mb"])}
                else:
                    best[key]["step_rss_mb"] = min(best[key]["step_rss_mb"], r["step_rss_mb"])
    dtype = "bf16 autocast" if args.bf16 else "float32"
    subject = "small Llama fwd+bwd" if args.what == "model" else "one attention call fwd+bwd"
    print(f"\n{subject}, {dtype}, {args.threads} thread(s), fastest of {args.repeats} steps x {args.rounds} round(s); "
          f"structure built inside the timed step for both paths")
    print(f"{'tokens':>7} {'dense s':>8} {'tree s':>8} {'speed-up':>9} {'dense MB':>9} {'tree MB':>8}"
          f" {'build d/t ms':>13}")
    for total in args.sizes:
        d, t = best[(total, "dense")], best[(total, "tree")]
        ds, ts = d["s_per_step"], t["s_per_step"]
        print(f"{d['tokens']:>7} {ds:>8.3f} {ts:>8.3f} {ds / ts:>8.2f}x {d['step_rss_mb']:>9.0f} {t['step_rss_mb']:>8.0f}"
              f" {1e3 * d['build_s']:>6.0f}/{1e3 * t['build_s']:<6.0f}")
    if len(args.sizes) > 1:
        for p in PATHS:
            rows = [best[(n, p)] for n in args.sizes]
            x = [r["tokens"] for r in rows]
            print(f"{p}: log-log slope vs tokens: time {slope(x, [r['s_per_step'] for r in rows]):.2f}, "
                  f"step memory {slope(x, [r['step_rss_mb'] for r in rows]):.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"args": vars(args), "best": list(best.values()), "runs": runs},
                                                   indent=1))
    plot(best, args.sizes, out.with_suffix(".png"),
         f"tree-varlen vs dense mask: {subject}, {dtype}, {args.threads} thread(s)")
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
