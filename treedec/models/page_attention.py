"""Page-blocked attention for an engine step: each page's rows against its own KV only.

A step holds rows of many pages; a page's rows may see only that page's KV slots. One
dense mask over the whole arena makes every row pay for every page's keys (rows x all
keys); running each page alone costs one kernel call per page. In between: pages are
put in buckets of similar row count and key count, and each bucket is one padded batch
(one SDPA call per bucket and layer). A page in prefill-like work (many rows, or a long
KV) then no longer pads the pages in plain decode (one row each) to its size.

Buckets: pages sorted by rows, cut where a page has fewer than `ratio` x the bucket's
largest row count; within that, sorted by keys and cut the same way. So each bucket's
padding is bounded by 1 / ratio in each dimension, and the number of buckets by the log
of the spread. `ratio=0` gives one batch padded to the step's largest page (the former
layout, kept for comparison).

`real` and `padded` count score elements (query rows x keys, per head and layer): real
is the sum over pages of its rows x its keys, padded what the kernels are handed.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import torch

NEG = float("-inf")
BUCKET_RATIO = 0.5  # a page joins a bucket with at least this fraction of its largest rows and keys
GATHER_BYTES = 16 << 20  # on a CPU: a bucket's pages in SDPA calls whose gathered K (and V) stay below this


@dataclass
class Bucket:
    """Pages padded into one batch: page p's query rows `rows[p]` (indices into the flat
    batch) see the keys `keys[p]` (indices into the cache after the step's append) under
    `mask[p]`. Padding: key index 0 with mask -inf; query row index 0, output dropped. The
    real rows, built on the host with the rest so that reading them back never waits on a
    device: `keep` (their places in the flattened [P * R] batch), `at` (their rows in the step's
    flat batch), `starts` (where each page's real rows start in `keep` and `at`)."""
    rows: torch.Tensor  # [P, R] long
    keys: torch.Tensor  # [P, K] long
    mask: torch.Tensor  # [P, 1, R, K] additive float
    keep: torch.Tensor  # [V] long: real query rows' places in the flattened [P * R] batch, ascending
    at: torch.Tensor  # [V] long: their rows in the step's flat batch
    starts: list[int]  # [P + 1]: page p's real query rows (its first ones) are keep[starts[p]:starts[p + 1]]

    @classmethod
    def build(cls, groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> "Bucket":
        P = len(groups)
        R = max(len(r) for r, _, _ in groups)
        K = max(len(k) for _, k, _ in groups)
        rows = torch.zeros(P, R, dtype=torch.long)
        keys = torch.zeros(P, K, dtype=torch.long)
        mask = torch.full((P, 1, R, K), NEG)
        for p, (r, k, m) in enumerate(groups):
            rows[p, :len(r)], keys[p, :len(k)] = r, k
            mask[p, 0, :len(r), :len(k)] = m
            mask[p, 0, len(r):, 0] = 0.0  # padded rows see one key (no all -inf row); dropped anyway
        keep = torch.cat([p * R + torch.arange(len(r)) for p, (r, _, _) in enumerate(groups)])
        starts = [0, *accumulate(len(r) for r, _, _ in groups)]
        return cls(rows, keys, mask, keep, torch.cat([r for r, _, _ in groups]), starts)

    @property
    def padded(self) -> int:
        return self.mask.shape[0] * self.mask.shape[2] * self.mask.shape[3]

    def to(self, device: torch.device, dtype: torch.dtype | None = None) -> "Bucket":
        """On `device`, the mask in `dtype` (the model's: cast once a step, not once a layer)."""
        return Bucket(self.rows.to(device), self.keys.to(device), self.mask.to(device, dtype), self.keep.to(device),
                      self.at.to(device), self.starts)


@dataclass
class PageBatch:
    """An engine step's queries grouped by page, in buckets (see the module's docstring)."""
    buckets: list[Bucket]
    real: int  # score elements: sum over pages of rows x keys
    padded: int  # score elements handed to the kernels

    def to(self, device: torch.device, dtype: torch.dtype | None = None) -> "PageBatch":
        """The same batch with its tensors on `device`, its masks in `dtype` (itself where they are so)."""
        b = self.buckets[0] if self.buckets else None
        if b is None or (b.rows.device == torch.device(device) and dtype in (None, b.mask.dtype)):
            return self
        return PageBatch([b.to(device, dtype) for b in self.buckets], self.real, self.padded)

    @classmethod
    def build(cls, groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
              ratio: float = BUCKET_RATIO) -> "PageBatch":
        """From (rows [r], keys [k], mask [r, k]) per page."""
        buckets = [Bucket.build([groups[i] for i in b]) for b in buckets_of([(len(r), len(k)) for r, k, _ in groups],
                                                                             ratio)]
        return cls(buckets, sum(len(r) * len(k) for r, k, _ in groups), sum(b.padded for b in buckets))


def buckets_of(sizes: list[tuple[int, int]], ratio: float = BUCKET_RATIO) -> list[list[int]]:
    """Indices of (rows, keys) sizes in buckets: by rows, then by keys, each cut where a size
    falls below `ratio` x the bucket's largest."""
    out = []
    for by_rows in _cut(sorted(range(len(sizes)), key=lambda i: -sizes[i][0]), lambda i: sizes[i][0], ratio):
        out.extend(_cut(sorted(by_rows, key=lambda i: -sizes[i][1]), lambda i: sizes[i][1], ratio))
    return out


def _cut(order: list[int], size, ratio: float) -> list[list[int]]:
    """`order` (sorted by `size`, largest first) cut where a size is below ratio x the first of its run."""
    runs: list[list[int]] = []
    for i in order:
        if runs and size(i) >= ratio * size(runs[-1][0]):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _pages_per_call(keys: int, key: torch.Tensor) -> int:
    """How many of a bucket's pages one SDPA call takes on a CPU: their gathered keys (and values)
    at most `GATHER_BYTES` each. A larger temporary is above glibc's mmap threshold (32 MB): mapped
    and faulted in afresh at every call, which cost a 12-page bucket of 4.4 k keys each at 0.1b
    about twice its step (docs/forced_results.md)."""
    per_page = keys * key.shape[1] * key.shape[-1] * key.element_size()
    return max(1, GATHER_BYTES // per_page)


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x [1, H, L, D] at slots idx [P, K] -> [P, H, K, D]; from token-major storage (the KV
    arena's) by whole rows, else along the slot dimension."""
    P, K = idx.shape
    tm = x[0].transpose(0, 1)  # [L, H, D]
    if tm.is_contiguous():
        return tm.index_select(0, idx.flatten()).view(P, K, x.shape[1], -1).transpose(1, 2)
    return x[0].index_select(1, idx.flatten()).view(x.shape[1], P, K, -1).transpose(0, 1)


def blocked_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, pages: PageBatch,
                      scale: float) -> torch.Tensor:
    """Attention of an engine step page by page, one padded batch per bucket: each page's
    rows against its own keys only. query [1, H, Q, D]; key, value [1, Hkv, K, D]; returns
    [1, Q, H, D]. Equal to attention over the whole arena under a mask hiding every other
    page's keys (masked keys weigh exp(-inf) = 0)."""
    H, Hkv = query.shape[1], key.shape[1]
    rows, outs = [], []
    for b in pages.buckets:
        P, R = b.rows.shape
        n = _pages_per_call(b.keys.shape[1], key) if key.device.type == "cpu" else P
        for first in range(0, P, n):
            part, p = slice(first, first + n), min(n, P - first)
            q = query[0].index_select(1, b.rows[part].flatten()).view(H, p, R, -1).transpose(0, 1)
            k, v = _gather(key, b.keys[part]), _gather(value, b.keys[part])
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=b.mask[part].to(query.dtype),
                                                                 scale=scale, enable_gqa=H != Hkv)  # [p, H, R, Dv]
            real = slice(b.starts[first], b.starts[first + p])
            keep = b.keep[real] - first * R if first else b.keep[real]
            outs.append(o.transpose(1, 2).reshape(p * R, H, -1).index_select(0, keep))
            rows.append(b.at[real])
    o = torch.cat(outs) if len(outs) > 1 else outs[0]
    out = query.new_empty(query.shape[2], H, o.shape[-1])
    out[torch.cat(rows) if len(rows) > 1 else rows[0]] = o
    return out[None]
