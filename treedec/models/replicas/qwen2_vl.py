"""A tiny random Qwen2-VL (`qwen2_vl`; MinerU2.5's and olmOCR's architecture)."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas import qwen_family as q


def build(out_dir: Path, fmt: str | None, seed: int) -> Path:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    hf = q.tokenizer("qwen2_vl", fmt, default_system=True)
    t = q.ids(hf)
    vision = dict(depth=2, embed_dim=32, hidden_size=64, mlp_ratio=2, num_heads=2, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, initializer_range=0.2)
    cfg = Qwen2VLConfig(text_config=q.text_config(t, [4, 6, 6]), vision_config=vision, image_token_id=t["image"],
                        video_token_id=t["video"], vision_start_token_id=t["start"], vision_end_token_id=t["end"],
                        tie_word_embeddings=False)
    return q.save(out_dir, Qwen2VLForConditionalGeneration, cfg, hf, 14, seed)
