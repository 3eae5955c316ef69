"""How well does a checkpoint read region crops (HSD's stage 1)? On N held-out synthetic
pages of the model's training distribution, each region is cropped twice and decoded
greedily by the model (prompt mode `crop`, no drafts, so this is reading quality, not
speed):

- `truth boxes`: crops of the ground-truth regions (the boxes the crop task was trained on);
- `pipeline boxes`: crops of the pipeline drafter's regions (what HSD's stage 1 decodes),
  each scored against the ground-truth region it overlaps most (IoU); the drafter's own
  text for that region is scored beside it.

Per set: crops, mean normalized edit distance of the content against the ground-truth
region (lower is better; a drafted piece of a region is scored against the whole region,
so `pipeline boxes` edits are pessimistic), the share of crops read exactly, and the
median / max decoding steps of a crop (a crop's steps bound stage 1's critical path; a
crop read as junk runs long: that makes stage 1 a loss). Last, what stage 2 gets: the
mean page content edit (draft_quality.py's) of the pipeline drafts, and of the same drafts
after stage 1 replaced each cropped block's content with its reading.

Crops are cut as HSD's stage 1 cuts them: a drafter's box moved to the nearest lines of the
model's patch grid (`VLM.crop_grid`, `snap_box`), then padded as in training; `--no-snap`
cuts box + 2 px (as before the grid fix).

    python experiments/stage1_quality.py --model shipped --pages 32
    python experiments/stage1_quality.py --model /path/to/checkpoint --pages 32
    # table on stdout; runs/stage1_quality.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def crop_jobs(samples, drafts, grid: int | None = None) -> dict[str, list[tuple]]:
    """Per set: (crop sample, ground-truth content or None, the drafter's block or None)."""
    from treedec.data import Sample
    from treedec.metrics.layout import iou
    from treedec.strategies.hsd_stage1 import stage1_crop
    from treedec.training.examples import CROP_CATEGORIES, crop_image

    jobs = {"truth boxes": [], "pipeline boxes": []}
    for s in samples:
        truth = [b for b in s.page.blocks if b.category in CROP_CATEGORIES and b.content]
        for k, b in enumerate(truth):
            jobs["truth boxes"].append((Sample(f"{s.name}#t{k}", None, crop_image(s.image, b.bbox, grid=grid)),
                                        b.content, None))
        page = drafts.get(s.name)
        if page is None:
            continue
        for k, b in enumerate(page.reading_order()):
            if b.category not in CROP_CATEGORIES or not b.content:
                continue
            best = max(truth, key=lambda t: iou(t.bbox, b.bbox), default=None)
            content = best.content if best is not None and iou(best.bbox, b.bbox) > 0 else None
            jobs["pipeline boxes"].append((Sample(f"{s.name}#p{k}", None, stage1_crop(s.image, b.bbox, grid)),
                                           content, b))
    return jobs


def page_edits(samples, drafts, jobs, texts) -> tuple[float, float]:
    """Mean page content edit (draft_quality.content_edit) of the pipeline drafts, and of
    the same drafts with every cropped block's content replaced by its stage-1 reading:
    the drafts stage 2 gets without and with stage 1."""
    import copy

    from draft_quality import content_edit

    reads = {id(b): t for (_, _, b), t in zip(jobs, texts)}
    before, after = [], []
    for s in samples:
        page = drafts.get(s.name)
        if page is None:
            continue
        before.append(content_edit(page, s.page))
        refined = copy.deepcopy(page)
        for b, r in zip(page.blocks, refined.blocks):
            if id(b) in reads:
                r.content = reads[id(b)]
        after.append(content_edit(refined, s.page))
    return statistics.fmean(before), statistics.fmean(after)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="shipped", help="a checkpoint folder, or 'shipped'")
    ap.add_argument("--pages", type=int, default=32, help="synthetic pages (held-out seeds)")
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--max-new-tokens", type=int, default=256, help="per crop: a crop read as junk is cut here")
    ap.add_argument("--cache-dir", default=None, help="draft cache; default: $TREEDEC_DRAFT_CACHE or ~/.cache/treedec/drafts")
    ap.add_argument("--no-snap", action="store_true",
                    help="cut crops as before the grid fix: box + 2 px, not snapped to the model's patch grid")
    ap.add_argument("--out", default=str(ROOT / "runs" / "stage1_quality.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from treedec.data import SynthDataset
    from treedec.ocr import draft_pages
    from treedec.ocr.cache import default_cache_dir
    from treedec.engine.engine import EngineConfig
    from treedec.metrics.edit_distance import normalized_edit_distance
    from treedec.errors import UserError
    from treedec.models.vlm import SHIPPED, VLM
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.formats.contract import EOS
    from treedec.strategies.base import Strategy
    from treedec.strategies.sequential import flat_target

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    path = Path(SHIPPED if args.model == "shipped" else args.model)
    try:
        vlm = VLM.load(path)
    except UserError as e:
        sys.exit(f"error: {e}")
    samples = list(SynthDataset(pages=args.pages, seed=args.seed, page=vlm.pages))
    cache = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    drafts = draft_pages(samples, cache_dir=cache)
    crop = Strategy("crop", "crop", vlm.tokenizer, flat_target)
    cfg = EngineConfig(max_pages=16, max_new_tokens=args.max_new_tokens)
    results = {}
    grid = None if args.no_snap else vlm.crop_grid  # the model's own pages fit its canvas: shown unscaled
    for name, jobs in crop_jobs(samples, drafts, grid).items():
        records = EmbeddedRuntime(cfg).run(vlm, crop, [c for c, _, _ in jobs], warmup=False).records
        texts = [r.text[: -len(EOS)] if r.text.endswith(EOS) else r.text for r in records]
        scored = [(t, truth, b) for t, (_, truth, b) in zip(texts, jobs) if truth is not None]
        edits = [normalized_edit_distance(t, truth) for t, truth, _ in scored]
        steps = [r.steps for r in records]
        row = {"crops": len(jobs), "scored": len(scored), "edit": statistics.fmean(edits) if edits else None,
               "exact": sum(e == 0 for e in edits) / len(edits) if edits else None,
               "median_steps": statistics.median(steps) if steps else None, "max_steps": max(steps, default=None),
               "cut": sum("max_new_tokens" in " ".join(r.flags) for r in records)}
        drafted = [normalized_edit_distance(b.content, truth) for _, truth, b in scored if b is not None]
        row["draft_edit"] = statistics.fmean(drafted) if drafted else None
        if name == "pipeline boxes":
            row["page_edit_drafts"], row["page_edit_stage1"] = page_edits(samples, drafts, jobs, texts)
        row["examples"] = [{"crop": c.name, "truth": truth, "draft": b.content if b else None, "read": t}
                           for (c, truth, b), t in zip(jobs, texts)]
        results[name] = row

    print(f"\nstage 1 (crop reading) of {path} on {len(samples)} held-out pages (edit: lower is better)")
    print(f"{'crops of':<16}{'crops':>7}{'edit':>8}{'exact':>8}{'draft edit':>12}{'median steps':>14}"
          f"{'max steps':>11}{'cut':>5}")
    for name, r in results.items():
        de = "-" if r["draft_edit"] is None else f"{r['draft_edit']:.3f}"
        print(f"{name:<16}{r['crops']:>7}{r['edit']:>8.3f}{r['exact']:>8.2f}{de:>12}{r['median_steps']:>14}"
              f"{r['max_steps']:>11}{r['cut']:>5}")
    p = results["pipeline boxes"]
    print(f"\npage content edit of the drafts stage 2 gets: pipeline {p['page_edit_drafts']:.3f}, "
          f"after stage 1 {p['page_edit_stage1']:.3f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": str(path), "pages": len(samples), "seed": args.seed, "sets": results},
                              indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
