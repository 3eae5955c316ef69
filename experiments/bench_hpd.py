"""HPD and PTP benchmark: sequential, padoc, mtp and hpd (and ptp, ptp_padoc: PTP over sequential and
padoc) on the same unseen pages, one process.

    python experiments/bench_hpd.py [--pages 32] [--seed 1000000] [--concurrency 1 16] [--k 6] [--top 1] [--head DIR]
                                    [--strategies sequential padoc mtp hpd ptp ptp_padoc] [--ptp-k 6]
                                    [--model DIR] [--out runs/bench_hpd]

`--model DIR`: a checkpoint folder instead of the shipped one (e.g. a copy without its `mtp/`
folder: PTP runs without the MTP head).

Per strategy: critical-path steps (median, mean; ratio against sequential), accepted per
step (tokens a stream gains per forward it takes part in: all streams, the root stream,
the branches), per-depth draft acceptance, quality; and whether the pages are identical
token for token (every stream's token ids) to the strategy's base (mtp and ptp vs sequential,
hpd and ptp_padoc vs padoc). Steps, tokens and acceptance do not depend on the machine (nor on the
concurrency: a page's steps are the forwards it takes part in; checked, `same_steps_at_every_concurrency`);
pages/s at each `--concurrency` (pages in flight) is wall clock, after an untimed one-page
warm-up per strategy: only meaningful on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from treedec.data import open_dataset
from treedec.drafters.mtp import HEAD_DIR
from treedec.engine.draft_stats import depth_figures
from treedec.engine.engine import Engine, EngineConfig
from treedec.formats.contract import parse_flat
from treedec.models.loader import load_vlm
from treedec.results.evaluate import evaluate_pages
from treedec.strategies.base import build_strategy

BASES = {"mtp": "sequential", "hpd": "padoc", "ptp": "sequential", "ptp_padoc": "padoc"}


def decode(vlm, cfg: dict, samples, max_pages: int):
    """(strategy, results by page name, wall seconds: binding the head, prompts and decoding)."""
    t = time.perf_counter()
    strategy = build_strategy(cfg, vlm.tokenizer)
    ecfg = EngineConfig(max_pages=max_pages, max_new_tokens=1024)
    strategy = strategy.for_run(vlm)  # the MTP head, the PTP placeholders
    items = [(s.name, vlm.prompt(s.image, strategy.mode), s) for s in samples]
    engine = Engine(vlm.adapter(), strategy, ecfg)
    results = {r.name: r for r in engine.run(items)}
    return strategy, results, time.perf_counter() - t


def stream_steps(results, root: bool) -> float:
    """Tokens per stream-step, over the root streams or over the branches."""
    tokens = steps = 0
    for r in results.values():
        for s in r.graph.streams:
            if (s.parent is None) == root:
                tokens += s.generated
                steps += sum(s.id in t for t in r.timeline)
    return tokens / steps if steps else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="pages in flight (each timed)")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--top", type=int, default=1, help="MTP first-token alternatives (1: HPD's chain)")
    ap.add_argument("--head", default=None, help="the MTP head's folder (default: mtp/ beside the shipped model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--strategies", nargs="+", default=["sequential", "padoc", "mtp", "hpd"],
                    help="of sequential padoc mtp hpd ptp ptp_padoc (sequential first: the ratios' reference)")
    ap.add_argument("--ptp-k", type=int, default=6, help="PTP placeholders per anchor")
    ap.add_argument("--model", default=None, help="a checkpoint folder (default: the shipped model)")
    ap.add_argument("--out", default="runs/bench_hpd")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": a.model}))
    samples = list(open_dataset({"name": "synth", "pages": a.pages, "seed": a.seed}, model_pages=vlm.pages))
    runs, rate = {}, {}
    for name in a.strategies:
        cfg = {"name": name, **({"k": a.k, "top": a.top, "head": a.head} if name in ("mtp", "hpd") else {})}
        if name.startswith("ptp"):
            cfg = {"name": "ptp", "base": BASES[name], "k": a.ptp_k}
        decode(vlm, cfg, samples[:1], 1)  # warm-up, untimed
        for c in a.concurrency:
            strategy, res, wall = decode(vlm, cfg, samples, c)
            rate[name, c] = len(res) / wall
            if name in runs:
                runs[name][2].append([res[n].steps for n in res] == [runs[name][1][n].steps for n in res])
            else:
                runs[name] = (strategy, res, [])
    rows = {}
    seq_steps = statistics.median(r.steps for r in runs["sequential"][1].values())
    for name, (strategy, res, same) in runs.items():
        steps = [r.steps for r in res.values()]
        pred = {n: parse_flat(strategy.flat_text(r.graph), *r.sample.image.size).page for n, r in res.items()}
        q = evaluate_pages(pred, [s.page for s in samples])
        row = {"median_steps": statistics.median(steps), "mean_steps": statistics.mean(steps),
               "steps_ratio_vs_sequential": seq_steps / statistics.median(steps),
               "accepted_per_step": sum(r.generated for r in res.values()) / sum(len(t) for r in res.values() for t in r.timeline),
               "accepted_per_step_root": stream_steps(res, True), "accepted_per_step_branches": stream_steps(res, False),
               "drafted": sum(r.drafted for r in res.values()), "accepted": sum(r.accepted for r in res.values()),
               "text_edit": q.get("text_edit"), "layout_f1": q.get("layout_f1"),
               **depth_figures(r.by_depth for r in res.values()),
               **{f"pages_per_s_at_{c}": rate[name, c] for c in a.concurrency},
               **{f"pages_per_s_vs_sequential_at_{c}": rate[name, c] / rate["sequential", c] for c in a.concurrency},
               "same_steps_at_every_concurrency": all(same)}
        if name in BASES:
            base = runs[BASES[name]][1]
            row["identical_token_ids_to_" + BASES[name]] = all(
                [s.tokens for s in res[n].graph.streams] == [s.tokens for s in base[n].graph.streams] for n in res)
        rows[name] = row
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"pages": a.pages, "seeds": f"{a.seed}-{a.seed + a.pages - 1}", "concurrency": a.concurrency, "k": a.k, "top": a.top,
            "ptp_k": a.ptp_k,
            "head": a.head or "shipped", "model": a.model or "shipped", "threads": a.threads,
            "mtp_head_folder_present": (Path(vlm.directory) / HEAD_DIR).is_dir(),
            "note": "pages/s is wall clock: meaningful only on a quiet machine"}
    (out / "bench_hpd.json").write_text(json.dumps({**meta, "strategies": rows}, indent=1))
    print(json.dumps(meta))
    rates = " ".join(f"{'p/s@' + str(c):>8}" for c in a.concurrency)
    print(f"{'strategy':<11} {'med steps':>9} {'mean':>7} {'x seq':>6} {'acc/step':>8} {'root':>5} {'branch':>6} "
          f"{'text_edit':>9} {rates}  same  acceptance by depth")
    for name, r in rows.items():
        same = next((v for k, v in r.items() if k.startswith("identical")), "")
        depth = " ".join(f"{v:.2f}" for v in r.get("acceptance_by_depth", []))
        f = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        print(f"{name:<11} {r['median_steps']:>9.0f} {r['mean_steps']:>7.1f} {r['steps_ratio_vs_sequential']:>5.2f}x "
              f"{r['accepted_per_step']:>8.2f} {f(r['accepted_per_step_root']):>5} {f(r['accepted_per_step_branches']):>6} "
              f"{r['text_edit']:>9.4f} {' '.join(f'{rate[name, c]:>8.2f}' for c in a.concurrency)}  {str(same):<5} {depth}")


if __name__ == "__main__":
    main()
