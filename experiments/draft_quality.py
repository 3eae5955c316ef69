"""How good are the pipeline drafter's drafts? Drafts N held-out synthetic pages (and the
12 real OmniDocBench demo pages when ../shared/omnidocbench_demo is there) and scores them
against ground truth with treedec's OmniDocBench metrics (`evaluate_pages`: text_edit,
formula_edit, table_teds, reading_order_edit, layout_f1), plus two HSD-minded figures:

- `content_edit`: normalized Levenshtein distance between all of a page's block contents
  (reading order, tables as HTML, formulas as LaTeX) in the draft and in the ground truth;
- `ngram_coverage`: the share of the ground truth's content character 8-grams that occur
  anywhere in the draft's content -- roughly what a drafter matching on the last tokens
  can propose.

Drafts go through the per-page cache (`--cache-dir`), so a rerun only scores. Timing
(`seconds_per_page`) counts drafted pages only, not cache hits.

    python experiments/draft_quality.py                       # 40 synthetic + the demo pages
    python experiments/draft_quality.py --pages 10 --no-real --upscale-min-side 768
    python experiments/draft_quality.py --model shipped --no-real   # the shipped model's page distribution
    # table on stdout; runs/draft_quality.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from treedec.ocr.pipeline import PipelineConfig
from treedec.page import Page

N = 8  # n-gram length of ngram_coverage


def page_content(page: Page) -> str:
    return "\n".join(b.content for b in page.reading_order() if b.content)


def content_edit(pred: Page, gt: Page) -> float:
    import Levenshtein

    a, b = page_content(pred), page_content(gt)
    return Levenshtein.distance(a, b) / max(len(a), len(b), 1)


def ngram_coverage(pred: Page, gt: Page, n: int = N) -> float | None:
    g, p = page_content(gt), page_content(pred)
    grams = [g[i:i + n] for i in range(len(g) - n + 1)]
    if not grams:
        return None
    have = {p[i:i + n] for i in range(len(p) - n + 1)}
    return sum(x in have for x in grams) / len(grams)


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def score(name: str, samples: list, cfg: PipelineConfig, cache_dir: Path) -> dict:
    from treedec.ocr import PipelineOCR, draft_pages
    from treedec.ocr.cache import cache_path
    from treedec.results.evaluate import evaluate_pages

    drafter = PipelineOCR(cfg)
    misses = sum(not cache_path(cache_dir, s.image, drafter.tag).exists() for s in samples if s.image is not None)
    t0 = time.perf_counter()
    preds = draft_pages(samples, cache_dir=cache_dir, drafter=drafter)
    elapsed = time.perf_counter() - t0
    gts = [s.page for s in samples]
    ev = evaluate_pages(preds, gts)
    per_page = {}
    for s in samples:
        pred = preds.get(s.name)
        fig = dict(ev["per_page"].get(s.page.name, {}))
        fig.pop("flags", None)
        if pred is not None:
            fig["content_edit"] = content_edit(pred, s.page)
            fig["ngram_coverage"] = ngram_coverage(pred, s.page)
            fig["blocks_draft"], fig["blocks_truth"] = len(pred.blocks), len(s.page.blocks)
        per_page[s.name] = fig
    keys = ("text_edit", "formula_edit", "table_teds", "table_teds_s", "reading_order_edit", "layout_f1",
            "layout_precision", "layout_recall")
    summary = {k: ev.get(k) for k in keys}
    summary.update(
        pages=len(samples), pages_drafted=misses,
        content_edit=_mean(f.get("content_edit") for f in per_page.values()),
        ngram_coverage=_mean(f.get("ngram_coverage") for f in per_page.values()),
        seconds_per_page=(elapsed / misses) if misses else None,
    )
    return {"set": name, **summary, "per_page": per_page}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=40, help="synthetic pages (held-out seeds)")
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--size", default="384x512", help="synthetic page size WxH in pixels")
    ap.add_argument("--cell", default="8x16", help="synthetic glyph cell WxH in pixels")
    ap.add_argument("--model", default=None,
                    help="a checkpoint folder: synthetic pages of its training distribution (treedec.json 'pages'), "
                         "overriding --size/--cell; 'shipped' for the shipped model")
    ap.add_argument("--real", default=str(ROOT.parent / "shared" / "omnidocbench_demo"))
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--cache-dir", default=None, help="default: $TREEDEC_DRAFT_CACHE or ~/.cache/treedec/drafts")
    ap.add_argument("--upscale-min-side", type=int, default=PipelineConfig.upscale_min_side)
    ap.add_argument("--layout-conf", type=float, default=PipelineConfig.layout_conf)
    ap.add_argument("--threads", type=int, default=PipelineConfig.threads)
    ap.add_argument("--no-tables", action="store_true", help="no table HTML (cell text only)")
    ap.add_argument("--ocr", default="{}", help="more drafter options as JSON, e.g. '{\"int8_rec\": false}'")
    ap.add_argument("--no-synth", action="store_true", help="real pages only")
    ap.add_argument("--out", default=str(ROOT / "runs" / "draft_quality.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from treedec.data import OmniDocBenchDataset, SynthDataset
    from treedec.ocr.cache import default_cache_dir

    cfg = PipelineConfig(layout_conf=args.layout_conf, upscale_min_side=args.upscale_min_side,
                         threads=args.threads, tables=not args.no_tables, **json.loads(args.ocr))
    cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    (w, h), (cw, ch) = (tuple(int(v) for v in x.lower().split("x")) for x in (args.size, args.cell))
    page = {"width": w, "height": h, "cell": (cw, ch)}
    if args.model:
        from treedec.models.vlm import SHIPPED, checkpoint_pages

        model = Path(SHIPPED if args.model == "shipped" else args.model)
        page = checkpoint_pages(model)
        if page is None:
            sys.exit(f"error: {model} has no treedec.json: --model takes a checkpoint written by treedec train")
    synth = SynthDataset(pages=args.pages, seed=args.seed, page=page)
    results = [] if args.no_synth else [score("synthetic", list(synth), cfg, cache_dir)]
    real = Path(args.real)
    if not args.no_real and real.is_dir():
        results.append(score("omnidocbench_demo", list(OmniDocBenchDataset(str(real))), cfg, cache_dir))
    elif not args.no_real:
        print(f"({real} is absent: real pages skipped)")

    cols = ("pages", "text_edit", "content_edit", "ngram_coverage", "formula_edit", "table_teds",
            "reading_order_edit", "layout_f1", "seconds_per_page")
    print(f"\npipeline drafter {cfg.tag()}  (edit: lower is better; coverage, TEDS, F1: higher)")
    print(f"{'set':<18}" + "".join(f"{c:>19}" for c in cols))
    for r in results:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{'-' if v is None else (f'{v:.3f}' if isinstance(v, float) else v):>19}")
        print(f"{r['set']:<18}" + "".join(cells))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from dataclasses import asdict

    out.write_text(json.dumps({"drafter": cfg.tag(), "config": asdict(cfg), "synthetic_seed": args.seed,
                               "synthetic_page": {"size": [page["width"], page["height"]], "cell": list(page["cell"])},
                               "sets": {r["set"]: r for r in results}}, indent=1, default=str), encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
