"""InternVL (transformers 5.19's `internvl`, the `-hf` checkpoint layout; HPD-Parsing's
InternVL3.5 is one): a ViT, a pixel-shuffle MLP, a Qwen2/Qwen3 language model with 1-D RoPE.

- Image: the GotOcr2 image processor with what `InternVLProcessor` passes it
  (`crop_to_patches=True`: tiles of the image plus a thumbnail), `num_patches` tiles.
- Placeholder: `InternVLProcessor.replace_image_token` writes `<img>` + `<IMG_CONTEXT>` *
  image_seq_length * num_patches + `</img>` (the tokenizer's start/context/end image
  tokens), image_seq_length = (image_size / patch_size)**2 * downsample_ratio**2.
- Positions: plain 1-D.
"""
from __future__ import annotations

from treedec.models.families.base import Family, plain_positions


def image_seq_length(config) -> int:
    """Image tokens per tile, as `InternVLProcessor` computes it from the model's config."""
    v = config.vision_config
    return int((v.image_size[0] // v.patch_size[0]) ** 2 * config.downsample_ratio ** 2)


def replacement(image: dict, vlm) -> str:
    hf = vlm.tokenizer.hf
    n = image_seq_length(vlm.model.config) * int(image["num_patches"][0])
    return hf.start_image_token + vlm.image_token * n + hf.end_image_token


INTERNVL = Family("internvl", "InternVLForConditionalGeneration", replacement, plain_positions, ("pixel_values",),
                  image_kwargs={"crop_to_patches": True})
