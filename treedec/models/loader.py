"""Loading a model by what a checkpoint folder says it is: the loader picks the model class
from config.json's `model_type` (the arrows point one way: loader -> model classes, never
back), and `load_vlm` builds the model a `model` config names."""
from __future__ import annotations

from pathlib import Path

from treedec.errors import UserError
from treedec.models.forced import ForcedModel
from treedec.models.page_model import PageModel
from treedec.models.checkpoint_vlm import CheckpointVLM
from treedec.models.families import FAMILIES
from treedec.models.vlm import SHIPPED, VLM, VLMSpec, model_type

# config.json model_type -> the class that loads it (each a `PageModel`): a transformers VLM of one of
# `treedec.models.families` (`CheckpointVLM`: embedded engine only), except treedec's own VLM (`VLM`: an
# idefics3 folder with treedec.json)
MODEL_TYPES: dict[str, type] = {kind: CheckpointVLM for kind in FAMILIES}


def load_model(directory: str | Path, attn: str = "sdpa", fmt: str | None = None) -> PageModel:
    """Load a checkpoint folder by its config.json's `model_type` (`MODEL_TYPES`); `fmt` (the
    `model.format` config key) is passed to the model (treedec: its tokens are required)."""
    d = Path(directory)
    kind = model_type(d)
    if kind not in MODEL_TYPES:
        hint = " (InternVL's remote-code layout: `python -m treedec convert src=DIR out=NEW` writes it as internvl)" \
            if kind == "internvl_chat" else ""
        raise UserError(f"unsupported model_type {kind!r} in {d / 'config.json'}; supported: "
                        f"{', '.join(MODEL_TYPES)}{hint}")
    if kind == "idefics3" and (d / "treedec.json").is_file():
        return VLM.load(d, attn=attn)
    return MODEL_TYPES[kind].load(d, attn=attn, fmt=fmt)


def checkpoint_path(model_cfg) -> Path | None:
    """The checkpoint folder a `model` config names: `path`, or the shipped tiny model for
    `model=tiny` without one; None for `model=random` and `model=forced`. Any other model without `path` is a
    one-line error (there is no shipped checkpoint to fall back on)."""
    name, path = model_cfg.get("name"), model_cfg.get("path")
    if name in ("random", "forced"):
        return None
    if not path and name not in (None, "tiny"):
        raise UserError(f"model={name} needs model.path=DIR (a local checkpoint folder); only model=tiny has a "
                        "shipped default")
    path = Path(path or SHIPPED)
    if not path.exists():
        hint = " (the shipped model is not in this checkout; train one with `python -m treedec train`)" \
            if not model_cfg.get("path") else ""
        raise UserError(f"model.path {str(path)!r} does not exist{hint}")
    return path


def load_vlm(model_cfg) -> PageModel:
    """The VLM a `model` config names: `path` (a checkpoint folder: treedec's Idefics3 VLM or
    a Qwen3-VL checkpoint, by its config.json's model_type), the shipped tiny model for
    `model=tiny` without `path`, random weights for `model=random`, or a forced decoder of
    `model.size` for `model=forced` (`treedec.models.forced`)."""
    from omegaconf import OmegaConf

    if model_cfg.get("name") == "forced":
        return ForcedModel(str(model_cfg.size), model_cfg.get("vision_tokens"), int(model_cfg.get("seed", 0)),
                           str(model_cfg.get("dtype", "float32")), model_cfg.get("device"), model_cfg.get("tokenizer"),
                           model_cfg.get("format"))
    path = checkpoint_path(model_cfg)
    if path is None:
        return VLM.tiny(VLMSpec(**OmegaConf.to_container(model_cfg.spec, resolve=True)))
    return load_model(path, fmt=model_cfg.get("format"))
