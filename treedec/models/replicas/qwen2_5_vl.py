"""A tiny random Qwen2.5-VL (`qwen2_5_vl`; Nanonets-OCR's and olmOCR-2's architecture):
windowed attention in the ViT except its full-attention blocks."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas import qwen_family as q


def build(out_dir: Path, fmt: str | None, seed: int) -> Path:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    hf = q.tokenizer("qwen2_5_vl", fmt, default_system=True)
    t = q.ids(hf)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                  window_size=56, fullatt_block_indexes=[1], spatial_merge_size=2, temporal_patch_size=2,
                  initializer_range=0.2)
    cfg = Qwen2_5_VLConfig(text_config=q.text_config(t, [4, 6, 6]), vision_config=vision, image_token_id=t["image"],
                           video_token_id=t["video"], vision_start_token_id=t["start"], vision_end_token_id=t["end"],
                           tie_word_embeddings=False)
    return q.save(out_dir, Qwen2_5_VLForConditionalGeneration, cfg, hf, 14, seed)
