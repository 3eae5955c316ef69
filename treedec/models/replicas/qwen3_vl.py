"""A tiny random Qwen3-VL (`qwen3_vl`): interleaved M-RoPE, DeepStack (both ViT layers feed
the first decoder layers). `fmt="treedec"`: a PaDoc-style fine-tune's tokenizer."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas import qwen_family as q


def build(out_dir: Path, fmt: str | None, seed: int) -> Path:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    hf = q.tokenizer("qwen3_vl", fmt, default_system=False)
    t = q.ids(hf)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64,
                  deepstack_visual_indexes=[0, 1], initializer_range=0.2)
    cfg = Qwen3VLConfig(text_config=q.text_config(t, [6, 5, 5], mrope_interleaved=True), vision_config=vision,
                        image_token_id=t["image"], video_token_id=t["video"], vision_start_token_id=t["start"],
                        vision_end_token_id=t["end"], tie_word_embeddings=False)
    return q.save(out_dir, Qwen3VLForConditionalGeneration, cfg, hf, 16, seed)
