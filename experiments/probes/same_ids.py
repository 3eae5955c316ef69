"""Two checkpoints of one model (e.g. float32 weights and their fp16-stored copy,
scripts/half_weights.py): do they decode the same token ids? Per strategy: the pages whose
streams differ (every stream, fork point, label and id compared), total steps and quality
of each. The check behind the model card's fp16 note.

    python experiments/probes/same_ids.py DIR_A DIR_B [--pages 64] [--seed 1000000] sequential padoc ...
"""
from __future__ import annotations

import argparse

import torch

from treedec.data import open_dataset
from treedec.engine.engine import EngineConfig
from treedec.evaluate import evaluate_pages
from treedec.models.vlm import VLM
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.stages.recording import run_with_ids
from treedec.strategies.base import build_strategy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("strategies", nargs="+")
    ap.add_argument("--pages", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1_000_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    got = {}
    for tag in (args.a, args.b):
        vlm = VLM.load(tag)
        samples = list(open_dataset({"name": "synth", "pages": args.pages, "seed": args.seed}, model_pages=vlm.pages))
        for s in args.strategies:
            res, ids = run_with_ids(EmbeddedRuntime(EngineConfig(max_pages=16)), vlm,
                                    build_strategy({"name": s}, vlm.tokenizer), samples)
            ev = evaluate_pages({r.name: r.page for r in res.records}, [x.page for x in samples])
            got[(tag, s)] = ids, sum(r.steps for r in res.records), ev["text_edit"], ev["layout_f1"]
    for s in args.strategies:
        (ia, sa, ea, fa), (ib, sb, eb, fb) = got[(args.a, s)], got[(args.b, s)]
        diff = sorted(k for k in ia if ia[k] != ib.get(k))
        print(f"{s}: {len(ia)} decoded (crops included), {len(diff)} differ {diff[:5]}; steps {sa} vs {sb}; "
              f"text edit {ea:.4f} vs {eb:.4f}; layout F1 {fa:.4f} vs {fb:.4f}")


if __name__ == "__main__":
    main()
