"""The model adapter: what the engine needs from a model, and nothing else.

Any HF causal LM or VLM whose forward takes `input_ids`, explicit `position_ids`, a 4D
float attention mask and a `DynamicCache` fits (Llama, Idefics3, Qwen3-VL text path).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

class capture_hidden:
    """Context manager recording what `model`'s LM head reads (its input rows: exactly the
    rows whose logits the forward keeps) — the base model's last hidden states, for drafters
    that draft from them (MTP heads). Works for any HF model with `get_output_embeddings`."""

    def __init__(self, model: torch.nn.Module, on: bool = True):
        self.head = model.get_output_embeddings() if on else None
        self.rows: torch.Tensor | None = None

    def __enter__(self) -> "capture_hidden":
        if self.head is not None:
            self._hook = self.head.register_forward_pre_hook(self._record)
        return self

    def _record(self, module, args):
        self.rows = args[0]

    def __exit__(self, *exc) -> None:
        if self.head is not None:
            self._hook.remove()


@dataclass
class Prompt:
    """A page's prompt: token ids plus the extra prefill inputs (e.g. pixel_values).

    `position_offset`: added by the engine to the position of every token it decodes after
    the prompt (0 for 1-D RoPE; Qwen3-VL's mrope delta, see `treedec.models.qwen3_vl`)."""
    ids: list[int]
    inputs: dict[str, Any] = field(default_factory=dict)
    position_offset: int = 0


class CausalLMAdapter:
    forced = False  # True: the engine picks every token from the page's ground truth (treedec.models.forced)

    def __init__(self, model: torch.nn.Module):
        self.model = model.eval()
        self.config = model.config
        self.text_config = model.config.get_text_config()  # a VLM's text_config, else the config itself
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device  # inputs go there (the engine builds them on the CPU)

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.text_config)

    @torch.inference_mode()
    def prefill(self, prompt: Prompt, hidden: bool = False):
        """Logits after the last prompt token [V] and the prompt's KV per layer; with `hidden`,
        also the last token's last-layer hidden state [H] (see `capture_hidden`)."""
        cache = self.new_cache()
        ids = torch.tensor([prompt.ids], dtype=torch.long, device=self.device)
        inputs = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in prompt.inputs.items()}
        with capture_hidden(self.model, hidden) as cap:
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **inputs)
        kv = [(layer.keys, layer.values) for layer in cache.layers]
        if hidden:
            return out.logits[0, -1].float(), kv, cap.rows[0, -1].float()
        return out.logits[0, -1].float(), kv

    supports_blocks = True  # `step(pages=...)`: page-blocked attention (treedec.models.attention)

    @torch.inference_mode()
    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache,
             keep: torch.Tensor | None = None, pages=None, hidden: bool = False, placeholders=None):
        """One forward over a flat batch of Q new tokens.

        ids, positions: [Q]; mask: [Q, K] additive float (0 / -inf) over K = cache + Q slots;
        keep: rows whose logits are needed (default all). Returns logits [len(keep), V];
        the cache grows by Q slots. With `pages` (a `treedec.models.attention.PageBatch`: each
        page's rows, keys and mask) attention runs page by page and `mask` is not needed. With
        `hidden`, returns (logits, the kept rows' last-layer hidden states [len(keep), H]). With
        `placeholders` (`treedec.models.placeholders`), ids from the vocabulary's size on are
        placeholder rows: embedded and adapted by them, no other row changed."""
        dev = self.device
        ids, positions = ids.to(dev), positions.to(dev)
        keep = keep.to(dev) if keep is not None else None
        rows = ids >= placeholders.cfg.vocab if placeholders is not None else None
        if rows is not None and rows.any():
            inputs = {"inputs_embeds": placeholders.embed_ids(self.model.get_input_embeddings(), ids)[None]}
            adapted = placeholders.applied(self.model, rows)
        else:
            inputs, adapted = {"input_ids": ids[None]}, nullcontext()
        from treedec.models.attention import engine_attention

        attention = {"attention_mask": mask[None, None].to(dev, self.dtype)} if pages is None else \
            {"attention_mask": None, "pages": pages.to(dev, self.dtype)}
        with capture_hidden(self.model, hidden) as cap, adapted, engine_attention(self.text_config):
            out = self.model(**inputs, position_ids=positions[None], past_key_values=cache, use_cache=True,
                             logits_to_keep=keep if keep is not None else 0, **attention)
        if hidden:
            return out.logits[0].float(), cap.rows[0].float()
        return out.logits[0].float()
