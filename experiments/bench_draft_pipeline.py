"""Drafting beside decoding: what cold-cache `padoc_hsd` costs on this machine, and how close
drafter workers bring it to the bound two shared cores allow.

    python experiments/bench_draft_pipeline.py [--pages 32] [--concurrency 16] [--workers 0 1 2]
        [--threads 2] [--pipeline-threads 2 1] [--ocr '{"rec_width": 48}'] [--hsd '{"stage1": false}']
        [--seed 3000000]
        [--out runs/bench_draft_pipeline]

Running time on a quiet 2-core machine, estimated from per-page costs measured under load
(drafter 1.5-3 CPU-s a page, most of it): about 8 minutes for the defaults (32 pages,
workers 0 1 2), about 4 minutes more per further --pipeline-threads value. On N unseen synthetic pages of the
shipped model's distribution (seeds from --seed, disjoint from its training and tuning
seeds), all at --concurrency pages in flight, one process:

1. sequential, end to end: the baseline of every ratio below;
2. drafter alone: every page drafted in this process from an empty cache (CPU-s, wall);
3. decoder alone: padoc_hsd with those drafts precomputed (warm cache): stage 1 + stage 2
   (CPU-s of this process, wall);
4. both, cold cache, for each --workers w: w=0 drafts every page before decoding (as
   before), w>0 drafts in w processes beside decoding (`strategy.draft_workers=w`): wall,
   pages/s, ratio to sequential, median critical-path steps and sequential's / its
   (stage 1 included), CPU-s (this process + the workers' drafting), pages identical (token
   ids) to the first row; each at every --pipeline-threads value (torch threads: with
   drafting processes on the same two cores, one engine thread may beat two);
5. the bound for two shared cores, max(D, E, (D + E) / 2) with D = the drafter's CPU-s and
   E = the decoder's wall alone, and each run's wall / bound (1.0 = at the bound).

`--ocr` sets the pipeline drafter's options (`strategy.ocr`) for every padoc_hsd run, e.g.
'{"rec_width": 48}' (recogniser inputs fitted to the crops instead of padded to 320 px) or
'{"det_side": 512}' (the detector on a smaller page); `--hsd` any other padoc_hsd option.

Every run starts from its own empty draft cache after an untimed one-page warm-up (which
also starts the worker pool and loads its models: started once per process). Writes
bench_draft_pipeline.json in --out and prints a table. Wall-clock figures from a loaded
machine say little: run it on a quiet one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.models.loader import load_vlm
from treedec.ocr.pipeline import PipelineConfig
from treedec.ocr.drafters import Drafters
from treedec.ocr.pool import DraftQueue
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.run.stages import run_strategy
from treedec.strategies.base import build_strategy


def timed_run(vlm, strategy_cfg: dict, samples, ecfg: EngineConfig, cold: bool) -> dict:
    """One end-to-end run after an untimed one-page warm-up: its figures and the CPU seconds
    this process spent (the drafting workers' are in `draft_cpu_s`)."""
    strategy = build_strategy(strategy_cfg, vlm.tokenizer)
    run_strategy(EmbeddedRuntime(ecfg), vlm, strategy, samples[:1], progress=False, warmup=False, cold_drafts=cold)
    cpu = time.process_time()
    res = run_strategy(EmbeddedRuntime(ecfg), vlm, strategy, samples, progress=False, warmup=False, cold_drafts=cold)
    cpu = time.process_time() - cpu
    steps = [r.steps for r in res.records]
    worker_cpu = sum(r.extra.get("draft_cpu_s", 0.0) for r in res.records)
    return {"strategy": strategy.name, "wall_s": res.wall_s, "pages_per_s": len(res.records) / res.wall_s,
            "median_steps": statistics.median(steps), "cpu_s_main": cpu, "cpu_s_workers": worker_cpu,
            "cpu_s": cpu + worker_cpu, "phases_s": res.phases,
            "accepted": sum(r.accepted for r in res.records), "drafted": sum(r.drafted for r in res.records),
            "texts": [vlm.tokenizer.encode(r.text) for r in res.records]}


def drafter_alone(samples, workers: int, config: PipelineConfig, cache_dir: str, drafters: Drafters) -> dict:
    """Every page drafted from the empty cache `cache_dir` (left there), by `drafters`' drafter or pool."""
    t = time.perf_counter()
    costs = [c for _, _, c in DraftQueue(samples, workers=workers, ahead=max(8, 2 * workers), cache_dir=cache_dir,
                                         config=config, drafters=drafters)]
    return {"workers": workers, "wall_s": time.perf_counter() - t, "cpu_s": sum(c.cpu_s for c in costs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the engine (runtime.threads)")
    ap.add_argument("--pipeline-threads", type=int, nargs="+", default=None,
                    help="torch threads for the padoc_hsd cold runs, each (default: --threads); with drafter workers "
                         "on the same cores, 1 may beat 2")
    ap.add_argument("--hsd", default="{}", help='further padoc_hsd options as JSON, e.g. \'{"stage1": false}\'')
    ap.add_argument("--ocr", default="{}", help='the pipeline drafter\'s options as JSON (strategy.ocr), e.g. \'{"rec_width": 48}\'')
    ap.add_argument("--seed", type=int, default=3_000_000)
    ap.add_argument("--max-new-tokens", type=int, default=4096)
    ap.add_argument("--out", default="runs/bench_draft_pipeline")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    samples = [generate_page(args.seed + i, SynthConfig(**vlm.pages)) for i in range(args.pages)]
    ecfg = EngineConfig(max_pages=args.concurrency, max_new_tokens=args.max_new_tokens)
    t0 = time.perf_counter()

    ocr = json.loads(args.ocr) or None
    config = PipelineConfig(**(ocr or {}))
    hsd = {"name": "padoc_hsd", "ocr": ocr, **json.loads(args.hsd)}
    seq = timed_run(vlm, {"name": "sequential"}, samples, ecfg, cold=True)
    drafters = Drafters()  # the drafter alone's drafter and pool, started before they are timed
    list(DraftQueue(samples[:1], workers=0, config=config, drafters=drafters))  # warm-up: models load (drafted again)
    with tempfile.TemporaryDirectory() as cache:  # one empty cache: filled by the drafter alone, read by the decoder
        draft = drafter_alone(samples, 0, config, cache, drafters)
        decode = timed_run(vlm, {**hsd, "cache_dir": cache}, samples, ecfg, cold=False)
    both = {}
    for t in args.pipeline_threads or [args.threads]:
        torch.set_num_threads(t)
        for w in args.workers:
            both[w, t] = timed_run(vlm, {**hsd, "draft_workers": w}, samples, ecfg, cold=True)
    torch.set_num_threads(args.threads)
    drafters.pool(2, config)  # started (models loaded) before it is timed
    with tempfile.TemporaryDirectory() as cache:  # the drafter alone in 2 workers: how drafting itself scales
        draft2 = drafter_alone(samples, 2, config, cache, drafters)

    D, E = draft["cpu_s"], decode["wall_s"]
    bound = max(D, E, (D + E) / 2)
    ref = next(iter(both.values()))["texts"]
    rows = []
    for (w, t), r in both.items():
        rows.append({"workers": w, "torch_threads": t, "wall_s": r["wall_s"], "pages_per_s": r["pages_per_s"],
                     "ratio_vs_sequential": r["pages_per_s"] / seq["pages_per_s"],
                     "median_steps": r["median_steps"], "fewer_steps_x": seq["median_steps"] / r["median_steps"],
                     "cpu_s_main": r["cpu_s_main"], "cpu_s_workers": r["cpu_s_workers"],
                     "wall_over_bound": r["wall_s"] / bound, "phases_s": r["phases_s"],
                     "accepted": r["accepted"], "rejected": r["drafted"] - r["accepted"],
                     "same_pages_as_first": r["texts"] == ref})
    out = {"pages": args.pages, "concurrency": args.concurrency, "torch_threads": args.threads, "seed": args.seed,
           "drafter": {"options": ocr or {}, "tag": config.tag()}, "padoc_hsd_options": json.loads(args.hsd),
           "cpu_count": os.cpu_count(),
           "sequential": {k: v for k, v in seq.items() if k != "texts"},
           "drafter_alone": draft, "drafter_alone_2_workers": draft2,
           "decoder_alone": {k: v for k, v in decode.items() if k != "texts"},
           "bound_s": bound, "bound_terms": {"draft_cpu_s": D, "decode_wall_s": E, "half_sum_s": (D + E) / 2},
           "padoc_hsd_cold": rows, "bench_wall_s": time.perf_counter() - t0}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bench_draft_pipeline.json").write_text(json.dumps(out, indent=1))

    n = args.pages
    print(f"{n} pages, {args.concurrency} in flight, torch threads {args.threads}, {os.cpu_count()} CPUs, "
          f"drafter {config.tag()} {ocr or 'defaults'}, padoc_hsd options {args.hsd}")
    print(f"sequential            wall {seq['wall_s']:7.2f} s  {seq['pages_per_s']:.3f} pages/s  "
          f"median steps {seq['median_steps']}")
    print(f"drafter alone         CPU {D:7.2f} s  wall {draft['wall_s']:7.2f} s  ({D / n:.3f} CPU-s/page);"
          f" in 2 workers wall {draft2['wall_s']:.2f} s, CPU {draft2['cpu_s']:.2f} s")
    print(f"decoder alone (warm)  CPU {decode['cpu_s_main']:7.2f} s  wall {E:7.2f} s  median steps {decode['median_steps']}")
    print(f"bound max(D, E, (D+E)/2) = max({D:.2f}, {E:.2f}, {(D + E) / 2:.2f}) = {bound:.2f} s"
          f" -> at most {n / bound:.3f} pages/s = {n / bound / seq['pages_per_s']:.2f}x sequential")
    print("padoc_hsd cold: workers threads  wall_s  pages/s  x_seq  steps  fewer_x  cpu_main  cpu_workers  wall/bound  same")
    for r in rows:
        print(f"{r['workers']:>22} {r['torch_threads']:>7}  {r['wall_s']:6.2f}  {r['pages_per_s']:7.3f}  {r['ratio_vs_sequential']:5.2f}"
              f"  {r['median_steps']:5.1f}  {r['fewer_steps_x']:7.2f}  {r['cpu_s_main']:8.2f}  {r['cpu_s_workers']:11.2f}"
              f"  {r['wall_over_bound']:10.2f}  {r['same_pages_as_first']}")
    print(f"(benchmark wall {out['bench_wall_s']:.0f} s; {Path(args.out) / 'bench_draft_pipeline.json'})")


if __name__ == "__main__":
    main()
