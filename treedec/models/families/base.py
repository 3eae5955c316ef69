"""A VLM family's differences, as plain data and small functions (see the package doc)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Family:
    model_type: str  # config.json's
    model_class: str  # the transformers class that loads it (…ForConditionalGeneration)
    # (the image processor's output for one image, the `CheckpointVLM`: its tokenizer, image processor, model
    # config) -> the text the family's processor writes in place of the prompt's one image placeholder
    replacement: Callable[[dict, object], str]
    # (model, expanded ids, image processor output, image token id) -> (prefill inputs, rope delta)
    positions: Callable[[torch.nn.Module, list[int], dict, int], tuple[dict, int]]
    image_inputs: tuple[str, ...]  # the image processor's outputs the model's forward takes
    rope_axes: int = 1  # rotary axes a decoded token's position is broadcast to (3: M-RoPE)
    image_kwargs: dict = field(default_factory=dict)  # what the family's processor passes its image processor
    takes_mm_token_type_ids: bool = False  # generate() wants them (M-RoPE families)

    def generate_inputs(self, ids: torch.Tensor, inputs: dict, image_id: int) -> dict:
        """What transformers' `generate` takes besides `input_ids` for the prompt `ids` [1, L]
        with the page's image inputs (as the family's processor returns them)."""
        out = {k: v for k, v in inputs.items() if k in self.image_inputs}
        if self.takes_mm_token_type_ids:
            out["mm_token_type_ids"] = (ids == image_id).int()
        return out


def plain_positions(model, ids: list[int], image: dict, image_id: int) -> tuple[dict, int]:
    """1-D RoPE: the model numbers the prompt itself; nothing shifts decoded positions."""
    return {}, 0
