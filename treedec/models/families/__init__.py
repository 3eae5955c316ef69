"""What differs between VLM families on the embedded engine, one module per family: the
model class, how the prompt's one image placeholder is expanded (as the family's
processor in transformers does: used where the processor itself cannot be built, e.g.
the Qwen processors' torchvision-only video processors), the image processor's settings
the family's processor passes, and the prompt's positions (M-RoPE by the model's own
`get_rope_index`, or plain 1-D). `FAMILIES` maps a config.json `model_type` to its family."""
from __future__ import annotations

from treedec.models.families.base import Family
from treedec.models.families.hunyuan_vl import HUNYUAN_VL
from treedec.models.families.idefics3 import IDEFICS3
from treedec.models.families.internvl import INTERNVL
from treedec.models.families.qwen_vl import PADDLEOCR_VL, QWEN2_5_VL, QWEN2_VL, QWEN3_VL

FAMILIES: dict[str, Family] = {f.model_type: f for f in (QWEN2_VL, QWEN2_5_VL, QWEN3_VL, INTERNVL, PADDLEOCR_VL,
                                                        IDEFICS3, HUNYUAN_VL)}
