"""Qwen3-VL checkpoints (e.g. a PaDoc-style Qwen3-VL-2B fine-tune) on the embedded engine:
the names the Qwen3-VL fine-tuning code (`train model=qwen3_vl`, `treedec.training.qwen3_vl_*`)
uses for what every VLM family shares (`treedec.models.checkpoint_vlm`: loading, prompt,
adapter; `treedec.models.families.qwen_vl`: M-RoPE and the image placeholder)."""
from __future__ import annotations

from treedec.models.checkpoint_tokenizer import REQUIRED_TOKENS, CheckpointTokenizer
from treedec.models.checkpoint_vlm import CheckpointAdapter as Qwen3VLAdapter
from treedec.models.checkpoint_vlm import CheckpointVLM as Qwen3VL
from treedec.models.families.qwen_vl import mrope_positions

__all__ = ["REQUIRED_TOKENS", "CheckpointTokenizer", "Qwen3VL", "Qwen3VLAdapter", "mrope_positions"]
