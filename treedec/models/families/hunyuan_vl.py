"""HunYuan-VL (HunyuanOCR: transformers 5.19's `hunyuan_vl`), HSD's headline target.

- Image: the HunYuan-VL image processor (`pixel_values`, `image_grid_thw`).
- Placeholder: `HunYuanVLProcessor.replace_image_token` (called here on the attributes it
  reads: the image processor's `merge_size` and `spatial_patch_size`, the processor's
  `cat_extra_token`, from processor_config.json, True by default): the tokenizer's image token
  h * (w + 1) (+ 2) times, between the `<image_start>`/`<image_end>` wrappers the chat
  template writes.
- Positions: its M-RoPE by the model's own `get_rope_index` (its number of axes is its
  `mrope_section`'s; the last three are width, height, image index); a decoded token's 1-D
  position is broadcast to every axis by the text model itself. The prefill passes the axes
  alone (no leading row of plain indices: `positions`).
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from treedec.models.families.base import Family
from treedec.models.families.qwen_vl import mrope_positions


def cat_extra_token(directory) -> bool:
    f = directory / "processor_config.json" if directory is not None else None
    return bool(json.loads(f.read_text()).get("cat_extra_token", True)) if f is not None and f.is_file() else True


def replacement(image: dict, vlm) -> str:
    from transformers import HunYuanVLProcessor

    me = SimpleNamespace(image_processor=vlm.image_processor, image_token=vlm.image_token,
                         cat_extra_token=cat_extra_token(vlm.directory))
    return HunYuanVLProcessor.replace_image_token(me, image, 0)


def positions(model, ids: list[int], image: dict, image_id: int) -> tuple[dict, int]:
    """Its M-RoPE axes only: its text model takes no leading row of plain indices (transformers
    5.19 keeps that row in the positions and then refuses their shape)."""
    pos, delta = mrope_positions(model, ids, image["image_grid_thw"], image_id)
    return {"position_ids": pos}, delta


HUNYUAN_VL = Family("hunyuan_vl", "HunYuanVLForConditionalGeneration", replacement, positions,
                    ("pixel_values", "image_grid_thw"), takes_mm_token_type_ids=True)
