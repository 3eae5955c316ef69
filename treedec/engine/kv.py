"""The KV arena: every page's KV in one HF cache (batch dim 1), one slot per token.

A slot is an index along the cache's sequence dimension. Shared prefixes are stored
once: a branch refers to its ancestors' slots, it never copies them. Freed slots are
masked out at once and reclaimed by `compact`, which returns the old -> new map.
"""
from __future__ import annotations

import torch


class KVArena:
    def __init__(self, cache):
        self.cache = cache  # an HF DynamicCache; forward passes append to it
        self.owner: list[int] = []  # page id per slot, -1 when free

    @property
    def size(self) -> int:
        return len(self.owner)

    @property
    def used(self) -> int:
        return self.size - self.owner.count(-1)

    def used_by(self, page: int) -> int:
        return self.owner.count(page)

    def add_prefill(self, kv: list[tuple[torch.Tensor, torch.Tensor]], page: int) -> list[int]:
        """Append a page's prompt KV (per layer (K, V) of shape [1, H, P, D]); its slots."""
        for i, (k, v) in enumerate(kv):
            self.cache.update(k, v, i)
        return self.reserve(kv[0][0].shape[2], page)

    def reserve(self, n: int, page: int) -> list[int]:
        """Slots of the `n` tokens the next forward appends for `page`."""
        start = len(self.owner)
        self.owner.extend([page] * n)
        return list(range(start, start + n))

    def free(self, slots) -> None:
        for s in slots:
            self.owner[s] = -1

    def compact(self) -> torch.Tensor | None:
        """Drop freed slots from the cache. Returns `remap` (old slot -> new slot, -1 if
        freed) or None when nothing was freed."""
        keep = [i for i, o in enumerate(self.owner) if o != -1]
        if len(keep) == len(self.owner):
            return None
        idx = torch.tensor(keep, dtype=torch.long)
        for layer in self.cache.layers:
            if layer.keys is not None and layer.keys.numel():
                layer.keys = layer.keys.index_select(2, idx)
                layer.values = layer.values.index_select(2, idx)
        remap = torch.full((len(self.owner),), -1, dtype=torch.long)
        remap[idx] = torch.arange(len(keep))
        self.owner = [self.owner[i] for i in keep]
        return remap
