"""Idefics3 checkpoints other than treedec's own (granite-docling, SmolDocling: transformers
5.19's `idefics3`): a SigLIP ViT, a pixel-shuffle connector, a Llama language model, 1-D RoPE.

- Image: the Idefics3 image processor with what `Idefics3Processor` passes it
  (`return_row_col_info=True`): a page split into rows x cols tiles plus the whole page.
- Placeholder: `Idefics3Processor.replace_image_token`: per tile
  `<fake_token_around_image><row_i_col_j>` + `<image>` * image_seq_len, a newline after each
  row, then `\\n<fake_token_around_image><global-img>` + `<image>` * image_seq_len +
  `<fake_token_around_image>` (the whole page alone without the tiles' part when not split);
  image_seq_len = (image_size / patch_size)**2 / scale_factor**2.
- Positions: plain 1-D.
"""
from __future__ import annotations

from types import SimpleNamespace

from treedec.models.families.base import Family, plain_positions

FAKE, GLOBAL = "<fake_token_around_image>", "<global-img>"


def image_seq_len(config) -> int:
    v = config.vision_config
    return int((v.image_size // v.patch_size) ** 2 / config.scale_factor ** 2)


def replacement(image: dict, vlm) -> str:
    """The processor's own `replace_image_token`, on the attributes it reads (the processor
    itself would add tokens to the checkpoint's tokenizer)."""
    from transformers import Idefics3Processor

    me = SimpleNamespace(fake_image_token=FAKE, global_image_tag=GLOBAL, image_token=vlm.image_token,
                         image_seq_len=image_seq_len(vlm.model.config))
    return Idefics3Processor.replace_image_token(me, image, 0)


IDEFICS3 = Family("idefics3", "Idefics3ForConditionalGeneration", replacement, plain_positions,
                  ("pixel_values", "pixel_attention_mask"), image_kwargs={"return_row_col_info": True})
