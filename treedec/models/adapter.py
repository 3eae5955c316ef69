"""The model adapter: what the engine needs from a model, and nothing else.

Any HF causal LM or VLM whose forward takes `input_ids`, explicit `position_ids`, a 4D
float attention mask and a `DynamicCache` fits (Llama, Idefics3, Qwen3-VL text path).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Prompt:
    """A page's prompt: token ids plus the extra prefill inputs (e.g. pixel_values).

    `position_offset`: added by the engine to the position of every token it decodes after
    the prompt (0 for 1-D RoPE; Qwen3-VL's mrope delta, see `treedec.models.qwen3_vl`)."""
    ids: list[int]
    inputs: dict[str, Any] = field(default_factory=dict)
    position_offset: int = 0


class CausalLMAdapter:
    def __init__(self, model: torch.nn.Module):
        self.model = model.eval()
        self.config = model.config
        text = getattr(model.config, "text_config", model.config)
        self.text_config = text
        self.dtype = next(model.parameters()).dtype

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.text_config)

    @torch.inference_mode()
    def prefill(self, prompt: Prompt) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Logits after the last prompt token [V] and the prompt's KV per layer."""
        cache = self.new_cache()
        ids = torch.tensor([prompt.ids], dtype=torch.long)
        out = self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **prompt.inputs)
        kv = [(layer.keys, layer.values) for layer in cache.layers]
        return out.logits[0, -1].float(), kv

    supports_blocks = True  # `step(pages=...)`: page-blocked attention (treedec.models.attention)

    @torch.inference_mode()
    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache,
             keep: torch.Tensor | None = None, pages=None) -> torch.Tensor:
        """One forward over a flat batch of Q new tokens.

        ids, positions: [Q]; mask: [Q, K] additive float (0 / -inf) over K = cache + Q slots;
        keep: rows whose logits are needed (default all). Returns logits [len(keep), V];
        the cache grows by Q slots. With `pages` (a `treedec.models.attention.PageBatch`: each
        page's rows, keys and mask) attention runs page by page and `mask` is not needed."""
        if pages is None:
            out = self.model(input_ids=ids[None], position_ids=positions[None],
                             attention_mask=mask[None, None].to(self.dtype), past_key_values=cache, use_cache=True,
                             logits_to_keep=keep if keep is not None else 0)
            return out.logits[0].float()
        from treedec.models.attention import register

        before = self.text_config._attn_implementation
        self.text_config._attn_implementation = register()
        try:
            out = self.model(input_ids=ids[None], position_ids=positions[None], attention_mask=None,
                             past_key_values=cache, use_cache=True, logits_to_keep=keep if keep is not None else 0,
                             pages=pages)
        finally:
            self.text_config._attn_implementation = before
        return out.logits[0].float()
