"""Tree-varlen attention: ancestor attention over a packed tree, with no dense L x L mask.

A packed tree is one sequence holding every stream's tokens back to back (pages too);
`TreeLayout` says, per stream (segment), which ancestor prefixes it sees. Each query
attends to (a) each ancestor's first `end` tokens and (b) its own segment causally.
Parts are computed separately and merged with the online-softmax rule, so memory grows
with sum(queries x visible keys) instead of L^2.

Registered as the attention implementation "treedec": with a `tree=` keyword (training)
it runs the tree path; otherwise it is SDPA with whatever mask it is given (the engine's
4D ancestor mask, or causal).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

NEG = float("-inf")


@dataclass(frozen=True)
class Segment:
    start: int  # first index in the packed sequence
    length: int
    prefix: tuple[tuple[int, int], ...] = ()  # (ancestor segment index, tokens of it visible)


@dataclass(frozen=True)
class TreeLayout:
    segments: tuple[Segment, ...]

    @property
    def total(self) -> int:
        return sum(s.length for s in self.segments)

    def dense_mask(self) -> torch.Tensor:
        """The equivalent boolean L x L mask (True = attend), for reference paths and tests."""
        L = self.total
        m = torch.zeros(L, L, dtype=torch.bool)
        for s in self.segments:
            rows = slice(s.start, s.start + s.length)
            m[rows, rows] = torch.ones(s.length, s.length, dtype=torch.bool).tril()
            for a, end in s.prefix:
                anc = self.segments[a]
                m[rows, anc.start:anc.start + end] = True
        return m


def _part(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float):
    """Partial softmax attention: (running max, sum of exp, unnormalized output)."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # [H, Q, K]
    if mask is not None:
        s = s.masked_fill(~mask, NEG)
    m = s.amax(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).min)  # fully masked rows stay finite
    p = torch.exp(s - m)
    return m, p.sum(-1, keepdim=True), torch.matmul(p, v)


def _merge(acc, part):
    if acc is None:
        return part
    m1, l1, o1 = acc
    m2, l2, o2 = part
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, l1 * a1 + l2 * a2, o1 * a1 + o2 * a2


def tree_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tree: TreeLayout, scale: float) -> torch.Tensor:
    """q: [1, H, L, D]; k, v: [1, Hkv, L, D] (grouped heads repeated here). Returns [1, L, H, D]."""
    h = q.shape[1]
    if k.shape[1] != h:
        k = k.repeat_interleave(h // k.shape[1], dim=1)
        v = v.repeat_interleave(h // v.shape[1], dim=1)
    q, k, v = q[0], k[0], v[0]  # [H, L, D]
    out = torch.empty_like(q)
    # queries that see each ancestor segment, with how much of it
    viewers: dict[int, list[tuple[int, int]]] = {}
    for i, s in enumerate(tree.segments):
        for a, end in s.prefix:
            viewers.setdefault(a, []).append((i, end))
    acc: dict[int, tuple] = {}
    for a, views in viewers.items():  # (a): all viewers of segment a in one matmul
        seg = tree.segments[a]
        width = max(end for _, end in views)
        rows = torch.cat([torch.arange(tree.segments[i].start, tree.segments[i].start + tree.segments[i].length)
                          for i, _ in views])
        ends = torch.cat([torch.full((tree.segments[i].length,), end) for i, end in views])
        mask = torch.arange(width)[None, :] < ends[:, None]  # [Q, width]
        m, l, o = _part(q[:, rows], k[:, seg.start:seg.start + width], v[:, seg.start:seg.start + width], mask, scale)
        at = 0
        for i, _ in views:
            n = tree.segments[i].length
            acc[i] = _merge(acc.get(i), (m[:, at:at + n], l[:, at:at + n], o[:, at:at + n]))
            at += n
    for i, s in enumerate(tree.segments):  # (b): own segment, causal
        sl = slice(s.start, s.start + s.length)
        causal = torch.ones(s.length, s.length, dtype=torch.bool).tril()
        m, l, o = _merge(acc.get(i), _part(q[:, sl], k[:, sl], v[:, sl], causal, scale))
        out[:, sl] = o / l
    return out.transpose(0, 1)[None]


def treedec_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      tree: TreeLayout | None = None, **kwargs):
    """HF attention function: tree-varlen with `tree=`, else SDPA."""
    if tree is not None:
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        return tree_attention(query, key, value, tree, scale), None
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def _no_mask(*args, **kwargs):
    """Mask builder for "treedec": masks come ready (engine) or are implied (tree / causal)."""
    return None


def register() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register("treedec", treedec_attention)
    AttentionMaskInterface.register("treedec", _no_mask)
    return "treedec"
