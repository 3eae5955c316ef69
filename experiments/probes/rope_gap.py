"""Does a model still read when its text sits further from the image? Token accuracy (teacher
forcing, sequential form) of a model on its own training pages, with every position after the
image shifted by GAP: RoPE sees the text GAP positions further from each glyph, nothing else
changes. The shipped v1 model (256 image tokens, text within ~450 positions of every glyph) is
the check behind "v1's reading does not carry over to v2's 1600-token pages". With --preset the
pages are another distribution's (e.g. v2_model), so `--gaps 0 --preset v2_model` reads how well
a model trained on small pages reads large ones (experiments/probes/positions_probe.sh).

    python experiments/probes/rope_gap.py [--model DIR ...] [--pages 6] [--gaps 0 250 500 1000 2000] [--preset NAME]
"""
from __future__ import annotations

import argparse
import tempfile

import torch

from treedec.models.vlm import SHIPPED, VLM
from treedec.training.packing import IGNORE
from treedec.training.trainer import TrainConfig, Trainer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=[str(SHIPPED)])
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--gaps", type=int, nargs="+", default=[0, 250, 500, 1000, 2000])
    ap.add_argument("--seed", type=int, default=777, help="the pages' draw (held out: not the training run's seed 0)")
    ap.add_argument("--preset", help="read pages of this preset (treedec/data/synth/presets.py) instead of the model's own")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for model in args.model:
        print(model)
        read(VLM.load(model), args)


def read(vlm: VLM, args) -> None:
    page = {"preset": args.preset} if args.preset else dict(vlm.pages)
    cfg = TrainConfig(steps=args.pages, pages_per_step=1, strategies=["sequential"], crops_per_page=0, bf16=False,
                      seed=args.seed, stages=[{"page": page}], warmup=1)
    trainer = Trainer(vlm, cfg, tempfile.mkdtemp())
    trainer.model.eval()
    counts = {gap: [0, 0] for gap in args.gaps}
    for step in range(args.pages):
        packed, px, _, _ = trainer.batch(step)
        after_image = int((packed.ids == vlm.tokenizer.image_id).nonzero().max()) + 1
        mask = packed.labels != IGNORE
        for gap in args.gaps:
            pos = packed.positions.clone()
            pos[after_image:] += gap
            with torch.no_grad():
                logits = trainer.model(input_ids=packed.ids[None], position_ids=pos[None], pixel_values=px,
                                       tree=packed.tree).logits[0]
            counts[gap][0] += int((logits[mask].argmax(-1) == packed.labels[mask]).sum())
            counts[gap][1] += int(mask.sum())
    for gap, (right, total) in counts.items():
        print(f"gap {gap:5}: token accuracy {right / total:.3f} ({total} tokens, {args.pages} pages)")


if __name__ == "__main__":
    main()
