"""The attention implementation "treedec" that the model's layers call (HF's AttentionInterface).

With a `tree=` keyword (training) it runs tree-varlen attention
(`treedec.models.tree_attention`); with `pages=` (an engine step, a `PageBatch`) each
page's rows attend to that page's KV only (`treedec.models.page_attention`); otherwise
it is SDPA with whatever mask it is given (the engine's 4D ancestor mask, or causal).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from treedec.models.page_attention import PageBatch, blocked_attention
from treedec.models.tree_attention import MATH_CHUNK, Segment, TreeLayout, tree_attention

__all__ = ["MATH_CHUNK", "PageBatch", "Segment", "TreeLayout", "blocked_attention", "engine_attention", "register",
           "tree_attention", "treedec_attention"]


def treedec_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      tree: TreeLayout | None = None, steer=None, pages: PageBatch | None = None, **kwargs):
    """HF attention function: tree-varlen with `tree=`, page-blocked with `pages=` (engine
    steps), else SDPA. `steer` (training only) observes one head's attention
    (treedec.training.grounding.Steer)."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if pages is not None:
        return blocked_attention(query, key, value, pages, scale), None
    if tree is not None:
        if dropout:
            raise ValueError("tree-varlen attention has no attention dropout; set attention_dropout=0")
        if steer is not None:
            steer.observe(module, query, key, value, tree, scale)
        return tree_attention(query, key, value, tree, scale), None
    if attention_mask is not None and query.device.type == "cpu" and key.shape[1] != query.shape[1]:
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                               dropout_p=dropout, scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def _no_mask(*args, **kwargs):
    """Mask builder for "treedec": masks come ready (engine) or are implied (tree / causal)."""
    return None


@contextmanager
def engine_attention(config):
    """The model's layers call `treedec_attention` for the duration (an engine step: its dense mask
    or its page blocks), whatever implementation `config` names otherwise (prefill, training)."""
    before = config._attn_implementation
    config._attn_implementation = register()
    try:
        yield
    finally:
        config._attn_implementation = before


def register() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register("treedec", treedec_attention)
    AttentionMaskInterface.register("treedec", _no_mask)
    return "treedec"
