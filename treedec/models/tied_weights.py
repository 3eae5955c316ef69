"""Small trained add-ons tied to the base model they were trained on (the MTP head, PTP's
placeholders): stored as fp16 safetensors plus a JSON of their config, the sha256 of the base
weights (`base_hash`) and figures; loaded only onto that base, else a one-line UserError."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from treedec.errors import UserError


@dataclass(frozen=True)
class TiedFiles:
    weights: str  # file names in the add-on's folder
    config: str
    name: str  # what it is, in messages: "MTP head", "PTP placeholders"
    plural: bool  # "placeholders were", "head was"
    train: str  # the command that trains it


def base_hash(model: nn.Module) -> str:
    """sha256 of a model's weights (names, shapes and values rounded to float16, in name
    order): what an add-on was trained on. Rounded to half precision, as weights are shipped
    (scripts/half_weights.py): a model and its fp16-stored copy are the same base."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        t = t.detach().cpu()
        h.update((t.half() if t.is_floating_point() else t).contiguous().numpy().tobytes())
    return h.hexdigest()


def save_tied(module: nn.Module, directory: str | Path, files: TiedFiles, meta: dict) -> Path:
    """`module`'s weights in fp16 and `meta` (its config, `base_sha256`, figures) as JSON."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().half().contiguous() for k, v in module.state_dict().items()}, str(d / files.weights))
    (d / files.config).write_text(json.dumps(meta, indent=1))
    return d


def read_tied(directory: str | Path, files: TiedFiles, base_model: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    """(meta, float32 state dict) of the add-on in `directory`, checked against `base_model`'s weights."""
    from safetensors.torch import load_file

    d = Path(directory)
    them, was = ("them", "were") if files.plural else ("one", "was")
    if not (d / files.config).is_file() or not (d / files.weights).is_file():
        raise UserError(f"no {files.name} at {d} (train {them}: {files.train})")
    meta = json.loads((d / files.config).read_text())
    have = base_hash(base_model)
    if meta.get("base_sha256") != have:
        raise UserError(f"the {files.name} at {d} {was} trained on base weights {str(meta.get('base_sha256'))[:12]}, "
                        f"not on this model's {have[:12]}: retrain {'them' if files.plural else 'it'} ({files.train})")
    return meta, {k: v.float() for k, v in load_file(str(d / files.weights)).items()}
