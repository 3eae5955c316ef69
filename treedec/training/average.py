"""Checkpoint averaging: the element-wise mean of the weights of several checkpoints of one
run (Izmailov et al.'s weight averaging along a run's tail, done offline).

Why: a small model's greedy decoding can move a lot between checkpoints a few hundred steps
apart, and the mean of several may read better than any of them; what it did for the shipped
model: its model card (`treedec/assets/models/tiny/README.md`)."""
from __future__ import annotations

import shutil
from pathlib import Path

from treedec.errors import UserError

WEIGHTS = "model.safetensors"


def average_checkpoints(dirs: list[str | Path], out: str | Path) -> Path:
    """Write the mean of the `dirs`' weights to `out`, with the last dir's other files
    (config, tokenizer, treedec.json). Every dir must hold the same tensors."""
    import torch
    from safetensors.torch import load_file, save_file

    dirs = [Path(d) for d in dirs]
    if not dirs:
        raise UserError("no checkpoints to average")
    missing = [str(d) for d in dirs if not (d / WEIGHTS).is_file()]
    if missing:
        raise UserError(f"no {WEIGHTS} in {', '.join(missing)}")
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for d in dirs:
        sd = load_file(d / WEIGHTS)
        if total and (sd.keys() != total.keys() or any(sd[k].shape != total[k].shape for k in sd)):
            raise UserError(f"{d} does not hold the same tensors as {dirs[0]}: not checkpoints of one model")
        for k, v in sd.items():
            dtypes[k] = v.dtype
            total[k] = total[k] + v.double() if k in total else v.double()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in dirs[-1].iterdir():
        if f.is_file() and f.name != WEIGHTS and f.suffix != ".pt":
            shutil.copy(f, out / f.name)
    save_file({k: (v / len(dirs)).to(dtypes[k]).contiguous() for k, v in total.items()}, out / WEIGHTS,
              metadata={"format": "pt"})
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m treedec.training.average",
                                 description="Average the weights of checkpoints of one run.")
    ap.add_argument("checkpoints", nargs="+", help="checkpoint folders (model.safetensors + config)")
    ap.add_argument("--out", required=True, help="folder to write the averaged checkpoint to")
    args = ap.parse_args(argv)
    try:
        print(f"averaged {len(args.checkpoints)} checkpoints -> {average_checkpoints(args.checkpoints, args.out)}")
    except UserError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
