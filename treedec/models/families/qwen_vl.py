"""Qwen2-VL, Qwen2.5-VL, Qwen3-VL and PaddleOCR-VL: one family shape (transformers 5.19's
`qwen2_vl`, `qwen2_5_vl`, `qwen3_vl`, `paddleocr_vl`).

- Placeholder: `Qwen2VLProcessor.replace_image_token` (and Qwen2.5/3's, the same for an
  image) writes `<|image_pad|>` t*h*w / merge_size**2 times, from the image processor's
  `image_grid_thw`.
- Positions: M-RoPE by the model's own `get_rope_index(input_ids, mm_token_type_ids,
  image_grid_thw)` (mm_token_type_ids: 1 at image tokens): a prompt token gets (t, h, w);
  text after the image continues at max + 1, so a decoded token at index i has position
  i + delta on the three axes. The prefill takes position_ids [4, 1, L] (row 0 the plain
  index, which the text model uses for its causal mask; rows 1-3 t, h, w).
"""
from __future__ import annotations

import torch

from treedec.models.families.base import Family


def replacement(image: dict, vlm) -> str:
    n = int(image["image_grid_thw"][0].prod()) // vlm.image_processor.merge_size ** 2
    return vlm.image_token * n


def mrope_positions(model, ids: list[int], image_grid_thw: torch.Tensor, image_id: int) -> tuple[torch.Tensor, int]:
    """The prompt's rotary positions [3, 1, L] (t, h, w) and its rope delta, by the model's own `get_rope_index`."""
    x = torch.tensor([ids], dtype=torch.long)
    pos, delta = model.model.get_rope_index(x, mm_token_type_ids=(x == image_id).int(), image_grid_thw=image_grid_thw)
    return pos, int(delta.reshape(-1)[0])


def mrope(model, ids: list[int], image: dict, image_id: int) -> tuple[dict, int]:
    pos, delta = mrope_positions(model, ids, image["image_grid_thw"], image_id)
    position_ids = torch.cat([torch.arange(len(ids)).view(1, 1, -1), pos])  # [4, 1, L]: index, t, h, w
    return {"position_ids": position_ids}, delta


def qwen(model_type: str, model_class: str) -> Family:
    return Family(model_type, model_class, replacement, mrope, ("pixel_values", "image_grid_thw"), rope_axes=3,
                  takes_mm_token_type_ids=True)


QWEN2_VL = qwen("qwen2_vl", "Qwen2VLForConditionalGeneration")
QWEN2_5_VL = qwen("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration")
QWEN3_VL = qwen("qwen3_vl", "Qwen3VLForConditionalGeneration")
# PaddleOCR-VL: the same placeholder and M-RoPE (`PaddleOCRVLProcessor.replace_image_token`, its model's
# `get_rope_index`), a NaViT-style ViT and an ERNIE-4.5 language model
PADDLEOCR_VL = qwen("paddleocr_vl", "PaddleOCRVLForConditionalGeneration")
