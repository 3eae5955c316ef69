"""Tiny random replicas of real VLM architectures, one module per transformers `model_type`
(`treedec.models.replicas.<model_type>`), each exposing
`build(out_dir: Path, fmt: str | None, seed: int) -> Path`: a checkpoint folder (config,
random weights, a real-style tokenizer with the family's chat template, the family's image
processor config) that `treedec.models.loader.load_model` reads as it reads the real one.
`fmt="treedec"` adds treedec's tokens and prompt modes; `fmt="hpd"` HPD-Parsing's three tokens
(`<BLOCK>`, `<FORK>`, `<CHILD>`) and a `treedec_format.json` naming `hpd` (its prompts are the
format's); None is the family's plain model.
`python -m treedec tiny model_type=NAME [format=NAME] out=DIR` builds one."""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from treedec.errors import UserError
from treedec.formats.declare import declare_format

# every model_type a replica is planned for; a module not (yet) in this checkout is refused by name
REPLICAS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "internvl", "idefics3", "paddleocr_vl", "hunyuan_vl")


def available() -> list[str]:
    """The model types whose replica module is in this checkout."""
    return [m for m in REPLICAS if importlib.util.find_spec(f"{__name__}.{m}") is not None]


def build_replica(model_type: str, out_dir: str | Path, fmt: str | None = None, seed: int = 0) -> Path:
    """Build the tiny replica of `model_type` into `out_dir`; an unknown type is one line."""
    if model_type not in available():
        raise UserError(f"no tiny replica of model_type {model_type!r}; available: {', '.join(available())}")
    module = importlib.import_module(f"{__name__}.{model_type}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = module.build(out, fmt, seed)
    if fmt not in (None, "treedec"):  # a checkpoint with another format's tokens says which (as a fine-tune would)
        declare_format(path, fmt)
    return path
