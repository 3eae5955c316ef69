"""Two-dimensional rotary positions for the tiny VLM's image patches (M-RoPE, as Qwen2-VL and
Qwen3-VL place theirs), computed from the one-dimensional positions the engine and the
trainer already give.

With `positions: linear` (v1) every input position is one integer, so on a 640 px page of
1600 patches the text starts ~1600 positions after the first glyph and RoPE sees a glyph's
distance grow with the page's size (experiments/probes/rope_gap.py: v1 reads at 0.95 token
accuracy on its own pages, 0.61 with the text 250 positions further away).

With `positions: planar` a position p of the prompt `<fake><global-img> <image>*n <fake> ...`
(the image from index `start`, a `side` x `side` grid, n = side^2) becomes three, (t, h, w):
- before the image: (p, p, p);
- image patch k = p - start: (start, start + k // side, start + k % side);
- after the image: q = p - n + side on all three axes, so text continues from the largest
  image position + 1, one page-width (not n) past the image's start, whatever the page's size.
The rotary frequencies are shared out among the axes interleaved (frequency i rotates by axis
i mod 3), as Qwen3-VL does, so each axis gets high and low frequencies. Text tokens have
t = h = w, so between text tokens this is exactly 1-D RoPE at q. Only the rotary module of the
text model changes: positions, KV, masks and the tree engine are untouched, and a planar
checkpoint holds the same weights as a linear one (the spec's `positions` says which).
"""
from __future__ import annotations

import torch


def planar_axes(positions: torch.Tensor, start: int, side: int) -> torch.Tensor:
    """[..., S] 1-D positions -> [3, ..., S] (t, h, w) as the module docstring says."""
    n = side * side
    k = positions - start
    image = (k >= 0) & (k < n)
    after = k >= n
    text = torch.where(after, positions - n + side, positions)
    t = torch.where(image, torch.full_like(positions, start), text)
    h = torch.where(image, start + torch.div(k, side, rounding_mode="floor"), text)
    w = torch.where(image, start + k.remainder(side), text)
    return torch.stack([t, h, w])


class PlanarRotary(torch.nn.Module):
    """Drop-in for a Llama model's `rotary_emb`: forward(x, position_ids [B, S]) -> cos, sin
    [B, S, head_dim], with each frequency turned by its axis's position (interleaved t, h, w)."""

    def __init__(self, rotary: torch.nn.Module, start: int, side: int):
        super().__init__()
        self.start, self.side = start, side
        self.register_buffer("inv_freq", rotary.inv_freq.detach().clone(), persistent=False)
        self.attention_scaling = rotary.attention_scaling
        self.register_buffer("axis", torch.arange(len(self.inv_freq)) % 3, persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        axes = planar_axes(position_ids, self.start, self.side).float()  # [3, B, S]
        pos = axes.permute(1, 2, 0)[..., self.axis]  # [B, S, F]: each frequency's own axis
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = pos * self.inv_freq.float()  # [B, S, F]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)


def use_planar(model: torch.nn.Module, start: int, side: int) -> None:
    """Give an Idefics3 model's text stack planar rotary positions (see the module docstring)."""
    text = model.model.text_model
    if not isinstance(text.rotary_emb, PlanarRotary):
        text.rotary_emb = PlanarRotary(text.rotary_emb, start, side)
