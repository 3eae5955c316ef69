"""Tiny random checkpoints of real VLM architectures, one builder per transformers
`model_type` (`python -m treedec tiny model_type=NAME`): each `build(out_dir, fmt, seed)`
writes a folder as the family ships it (config.json, safetensors weights, a BPE tokenizer
with the family's chat template, the image processor's config, generation_config.json)
that transformers and vLLM load. Made at test time, never committed."""
from __future__ import annotations

from typing import Callable

from treedec.models.replicas import hunyuan_vl, idefics3, paddleocr_vl

REPLICAS: dict[str, Callable] = {
    "idefics3": idefics3.build,
    "paddleocr_vl": paddleocr_vl.build,
    "hunyuan_vl": hunyuan_vl.build,
}
