"""Where did a run lose layout F1? For each page of a `python -m treedec run` output folder,
its predicted blocks against the ground truth of the same data set (rebuilt from the run's
config.yaml), sorted into kinds (treedec/metrics/layout_errors.py): a block called another
category, a box of the right category that overlaps too little (a row too tall, short or
shifted), a block missed, a box predicted where there is none.

    python -m treedec run strategy=sequential data.pages=200 data.seed=2000000 out=runs/val
    python experiments/layout_errors.py runs/val                 # table + a few examples each
    python experiments/layout_errors.py runs/val --examples 0 --json runs/val/layout_errors.json
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from omegaconf import OmegaConf

from treedec.data import open_dataset
from treedec.io.omnidocbench import page_from_omnidocbench
from treedec.metrics.layout_errors import layout_errors, tally
from treedec.models.vlm import SHIPPED, checkpoint_pages


def model_pages(cfg) -> dict | None:
    """The synthetic page distribution of the run's model (what `run` defaults data.page to)."""
    if cfg.get("model") and cfg.model.get("name") == "random":
        return None  # random weights carry no page distribution
    return checkpoint_pages(cfg.model.path if cfg.get("model") and cfg.model.get("path") else SHIPPED)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a `python -m treedec run` out= folder")
    ap.add_argument("--examples", type=int, default=3, help="examples printed per kind of error")
    ap.add_argument("--json", type=Path, help="also write every error here")
    args = ap.parse_args(argv)
    config = args.run / "config.yaml"
    if not config.is_file():
        print(f"error: {config} not found: give the out= folder of `python -m treedec run`", file=sys.stderr)
        return 2
    cfg = OmegaConf.load(config)
    samples = list(open_dataset(cfg.data, render=False, model_pages=model_pages(cfg)))
    if not any(s.page is not None for s in samples):
        print(f"error: the run's data set ({cfg.data.name}) has no ground truth to compare with", file=sys.stderr)
        return 2
    by_kind, errors, rows, no_pred, no_gt, n_blocks = defaultdict(list), [], [], [], [], 0
    for s in samples:
        f = args.run / "pages" / f"{s.name}.omnidocbench.json"
        if s.page is None:
            no_gt.append(s.name)
            continue
        n_blocks += len(s.page.blocks)
        if not f.is_file():
            no_pred.append(s.name)
            continue
        for e in layout_errors(page_from_omnidocbench(json.loads(f.read_text())), s.page):
            by_kind[e.label].append((s.name, e))
            errors.append(e)
            rows.append({"page": s.name, "error": e.label, "iou": round(e.iou, 3),
                         "gt": None if e.gt is None else {"bbox": e.gt.bbox, "content": e.gt.content},
                         "pred": None if e.pred is None else {"bbox": e.pred.bbox, "content": e.pred.content}})
    counts = tally(errors)
    print(f"{args.run}: {len(samples)} pages, {n_blocks} annotated blocks, "
          f"{sum(n for k, n in counts.items() if not k.startswith('extra'))} unmatched, "
          f"{sum(n for k, n in counts.items() if k.startswith('extra'))} extra predictions")
    for label, n in counts.most_common():
        print(f"  {n:5d}  {label}")
        for name, e in by_kind[label][:args.examples]:
            g = f"gt {tuple(round(v) for v in e.gt.bbox)} {e.gt.content[:24]!r}" if e.gt else ""
            p = f"pred {tuple(round(v) for v in e.pred.bbox)} {e.pred.content[:24]!r}" if e.pred else ""
            print(f"         {name}  {g}  {p}" + (f"  IoU {e.iou:.2f}" if e.kind == "box" else ""))
    if no_gt:
        print(f"  {len(no_gt)} pages have no ground truth (first: {no_gt[0]})")
    if no_pred:
        print(f"  {len(no_pred)} pages have no prediction in {args.run / 'pages'} (first: {no_pred[0]})")
    if args.json:
        args.json.write_text(json.dumps({"run": str(args.run), "counts": dict(counts), "no_prediction": no_pred,
                                         "no_ground_truth": no_gt, "errors": rows}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
