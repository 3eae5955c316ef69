"""Embedded-engine benchmark: sequential vs padoc (and any other strategies) on the same
checkpoint and pages, at several concurrency levels, in one process; plus the engine
running one stream vs plain greedy decoding of the same model (HF forward + DynamicCache).

    python experiments/bench_engine.py [--model PATH|random] [--pages 32] [--concurrency 1 4 16 64]
        [--strategies sequential padoc] [--out runs/bench_engine]

A strategy may carry options, `name:key=value,key=value` (e.g. `hsd:drafts=oracle`); its
rows are labelled with the whole string. `attention=dense|blocked` there is the engine's
(e.g. `sequential:attention=dense` against `sequential`).

Every figure is end to end and from a cold draft cache (each strategy at each level drafts
its pages itself; `--warm-drafts`: the draft cache as configured, labelled so): wall time
holds generating the pages, drafting, HSD's stage 1, decoding and writing the outputs; the
phases are in `phases_s` and the report's phase table. The one-stream check compares the
engine's token ids with plain greedy decoding's, token for token.

Figures are ratios against the sequential baseline measured in the same run. Writes
bench_engine.json, bench_engine.png (pages/s and P95 latency vs concurrency) and report.html;
the measurement is treedec.results.speed's, as in `python -m treedec run concurrency=[1,4,16]`.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import Engine, EngineConfig
from treedec.errors import UserError
from treedec.results.evaluate import evaluate_pages
from treedec.models.loader import load_vlm
from treedec.models.vlm import VLMSpec
from treedec.report.plots import concurrency_curves
from treedec.report.html import write_report
from treedec.report.tables import phase_rows
from treedec.run.passes import charge_write
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.run.stages import run_strategy
from treedec.results.speed import add_ratios, concurrency_levels, measure_levels
from treedec.strategies.base import build_strategy


def plain_greedy(vlm, prompt, max_new: int) -> tuple[list[int], float]:
    """Reference decoding: prefill, then one token per forward with HF's own cache."""
    from transformers import DynamicCache

    model, tok = vlm.model, vlm.tokenizer
    t = time.perf_counter()
    with torch.inference_mode():
        cache = DynamicCache(config=model.config.text_config)
        ids = torch.tensor([prompt.ids])
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **prompt.inputs)
        new = []
        for _ in range(max_new):
            nxt = int(out.logits[0, -1].argmax())
            new.append(nxt)
            if nxt == tok.eos_id:
                break
            out = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True)
    return new, time.perf_counter() - t


ENGINE_KEYS = ("attention",)  # options that go to the engine (EngineConfig), not to the strategy


def _strategy_cfg(spec: str) -> tuple[dict, dict]:
    """`name` or `name:key=value,...` -> (strategy config, engine overrides); values are
    parsed as YAML scalars; `attention=` is the engine's."""
    import yaml

    name, _, opts = spec.partition(":")
    cfg, engine = {"name": name}, {}
    for kv in filter(None, opts.split(",")):
        key, sep, value = kv.partition("=")
        if not sep:
            raise SystemExit(f"--strategies: expected key=value in {spec!r}, got {kv!r}")
        (engine if key in ENGINE_KEYS else cfg)[key] = yaml.safe_load(value)
    return cfg, engine


def _f(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint folder; default the shipped model; 'random' for a smoke run")
    ap.add_argument("--pages", type=int, default=32)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--strategies", nargs="+", default=["sequential", "padoc"],
                    help="strategy names, optionally with options: name:key=value,...")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--out", default="runs/bench_engine")
    ap.add_argument("--warm-drafts", action="store_true",
                    help="drafts from the draft cache as configured (precomputed), not an empty one: label such figures")
    args = ap.parse_args()
    try:
        args.concurrency = concurrency_levels(args.concurrency, 1)
    except UserError:
        ap.error(f"--concurrency: levels must be positive integers, got {' '.join(map(str, args.concurrency))}")
    torch.set_num_threads(2)
    model_cfg = OmegaConf.create({"name": "random" if args.model == "random" else "tiny",
                                  "path": None if args.model in (None, "random") else args.model,
                                  "spec": OmegaConf.structured(VLMSpec)})
    vlm = load_vlm(model_cfg)
    t_load = time.perf_counter()
    samples = [generate_page(args.seed + i, SynthConfig(**vlm.pages)) for i in range(args.pages)]  # its training pages
    load_s = time.perf_counter() - t_load  # charged to every run, as each would load its pages
    specs = [_strategy_cfg(spec) for spec in args.strategies]
    strategies = [build_strategy(cfg, vlm.tokenizer) for cfg, _ in specs]

    def decode(i: int, conc: int, progress: bool):
        ecfg = EngineConfig(max_pages=conc, max_new_tokens=args.max_new_tokens, **specs[i][1])
        res = charge_write(run_strategy(EmbeddedRuntime(ecfg), vlm, strategies[i], samples, progress=False,
                                        cold_drafts=not args.warm_drafts))
        res.charge("load", load_s)
        res.strategy = args.strategies[i]  # the label, options included
        return res

    rows, results = measure_levels(decode, args.strategies, args.concurrency)
    add_ratios(rows, args.strategies[0])
    # quality of every run against the pages' ground truth (greedy: the same at every level)
    by_key = {(level, res.strategy): res for level, rs in results.items() for res in rs}
    for r in rows:
        res = by_key[(r["concurrency"], r["strategy"])]
        ev = evaluate_pages({x.name: x.page for x in res.records}, [x.gt for x in res.records])
        r.update(text_edit=ev.get("text_edit"), layout_f1=ev.get("layout_f1"), table_teds=ev.get("table_teds"),
                 formula_edit=ev.get("formula_edit"))
    for r in rows:
        r["tokens"] = r["generated_tokens"]  # the name earlier bench_engine.json files used
    # one stream: the engine vs plain decoding, same prompts, token ids compared in full
    eng_s = plain_s = 0.0
    same = True
    seq = build_strategy({"name": "sequential"}, vlm.tokenizer)
    for s in samples[: min(8, len(samples))]:
        prompt = vlm.prompt(s.image, seq.mode)
        ref, dt = plain_greedy(vlm, prompt, args.max_new_tokens)
        plain_s += dt
        engine = Engine(vlm.adapter(), seq, EngineConfig(max_pages=1, max_new_tokens=args.max_new_tokens))
        t = time.perf_counter()
        [r] = list(engine.run([(s.name, prompt, s)]))
        eng_s += time.perf_counter() - t
        same &= r.graph[0].tokens[len(prompt.ids):] == ref
    one = {"engine_s": eng_s, "plain_s": plain_s, "engine_over_plain": eng_s / plain_s, "same_tokens": same}
    print(f"\n{'conc':>5} {'strategy':<24} {'steps':>7} {'root':>5} {'acc/step':>8} {'pages/s':>8} {'p95 s':>7} {'steps x':>8} "
          f"{'thru x':>7} {'p95 x':>6} {'text_edit':>9} {'layout_f1':>9}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['strategy']:<24} {r['median_steps']:>7.0f} {r['median_root_steps']:>5.0f} "
              f"{r['accepted_per_step']:>8.2f} "
              f"{r['pages_per_s']:>8.3f} {r['p95_latency_s']:>7.2f} {r['steps_ratio']:>7.2f}x {r['throughput_ratio']:>6.2f}x "
              f"{r['p95_ratio']:>5.2f}x {_f(r['text_edit']):>9} {_f(r['layout_f1']):>9}")
    print(f"one stream: engine {eng_s:.2f}s vs plain {plain_s:.2f}s -> {one['engine_over_plain']:.2f}x, same tokens: {same}")
    for r in phase_rows(rows):
        print("  ".join(f"{k}={_f(v) if isinstance(v, float) else v}" for k, v in r.items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_engine.json").write_text(json.dumps({"rows": rows, "one_stream": one, "args": vars(args)}, indent=1))
    plot = concurrency_curves(rows, out / "bench_engine.png", f"{len(samples)} pages at each level, same process")
    write_report(out, {"model": args.model or "shipped", "pages": len(samples), "max_new_tokens": args.max_new_tokens,
                       "one_stream": one}, {}, [plot], title="treedec bench_engine",
                 tables={"Throughput and latency by concurrency": rows,
                         "Wall time by phase (s; per page: phases_per_page_s)": phase_rows(rows)})
    print(f"wrote {out}/bench_engine.json, bench_engine.png, report.html")


if __name__ == "__main__":
    main()
