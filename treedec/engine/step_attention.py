"""Where each row of an engine step may look, in the two forms the model takes.

A step is a flat batch of spans, one per stream with work: its `n` pending tokens then
its `d` draft nodes. A span's rows see its stream's visible KV slots (ancestors' prefixes
and its own tokens), its pending tokens causally, and its draft nodes along the draft
tree. That is written either as one dense additive mask over the whole arena
(`dense_mask`: rows x (arena + rows)) or page by page (`page_batch`: each page's rows
against its own slots only, in buckets of similar size; `treedec.models.page_attention`).
`AttentionStats` counts the score elements each step hands the kernels against the real
ones (the padding waste).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from treedec.engine.draft import DraftTree
from treedec.models.page_attention import BUCKET_RATIO, PageBatch

NEG_INF = float("-inf")


@dataclass
class Span:
    page: int  # page id (spans of one page are contiguous)
    row: int  # first row in the flat batch
    n: int  # pending tokens
    tree: DraftTree | None  # draft nodes after them
    vis: torch.Tensor  # KV slots the stream sees (sorted or not)

    @property
    def rows(self) -> int:
        return self.n + (len(self.tree) if self.tree else 0)


def _fill(block: torch.Tensor, vis_cols: torch.Tensor, new: int, s: Span) -> None:
    """Open a span's rows `block` [rows, cols] (all -inf) where they may look: the columns
    `vis_cols` (its visible KV) and, from column `new`, the span's own rows."""
    n, d = s.n, s.rows - s.n
    block.index_fill_(1, vis_cols, 0.0)
    block[:n, new:new + n] = torch.triu(torch.full((n, n), NEG_INF), diagonal=1)
    block[n:, new:new + n] = 0.0  # draft nodes see every pending token ...
    if d:  # ... and their own ancestors in the draft tree
        block[n:, new + n:new + n + d] = torch.zeros(d, d).masked_fill(~s.tree.ancestor_mask(), NEG_INF)


def dense_mask(spans: list[Span], base: int, n_new: int) -> torch.Tensor:
    """[n_new, base + n_new] additive mask over the whole arena (slots < base) and the step's rows."""
    mask = torch.full((n_new, base + n_new), NEG_INF)
    for s in spans:
        _fill(mask[s.row:s.row + s.rows], s.vis, base + s.row, s)
    return mask


def page_slots(owner: list[int], base: int) -> dict[int, torch.Tensor]:
    """Page id -> its arena slots below `base`, ascending (one sort over the arena)."""
    if not base:
        return {}
    vals, order = torch.sort(torch.tensor(owner[:base], dtype=torch.long), stable=True)
    pids, counts = torch.unique_consecutive(vals, return_counts=True)
    return {int(p): sl for p, sl in zip(pids.tolist(), order.split(counts.tolist())) if p >= 0}


def page_sizes(spans: list[Span], slots: dict[int, torch.Tensor]) -> list[tuple[int, int]]:
    """(rows, keys) of each page of the step, in span order: keys = its slots + its new rows."""
    rows: dict[int, int] = {}
    for s in spans:
        rows[s.page] = rows.get(s.page, 0) + s.rows
    return [(r, len(slots.get(p, ())) + r) for p, r in rows.items()]


def page_batch(spans: list[Span], slots: dict[int, torch.Tensor], base: int,
               ratio: float = BUCKET_RATIO) -> PageBatch:
    """The step page by page: each page's rows see its own slots, then its new rows; each
    span's rows of that page's mask are written as in `dense_mask`, on the page's columns."""
    empty = torch.empty(0, dtype=torch.long)
    groups, i = [], 0
    while i < len(spans):
        j = i
        while j < len(spans) and spans[j].page == spans[i].page:
            j += 1
        old = slots.get(spans[i].page, empty)
        r0, n = spans[i].row, spans[j - 1].row + spans[j - 1].rows - spans[i].row
        local = torch.full((n, len(old) + n), NEG_INF)
        for s in spans[i:j]:
            cols = torch.searchsorted(old, s.vis)
            if len(cols) and (int(cols.max()) >= len(old) or not bool((old[cols] == s.vis).all())):
                raise ValueError(f"page {s.page}: a stream sees KV slots its page does not own")
            _fill(local[s.row - r0:s.row - r0 + s.rows], cols, len(old) + s.row - r0, s)
        groups.append((torch.arange(r0, r0 + n), torch.cat([old, base + torch.arange(r0, r0 + n)]), local))
        i = j
    return PageBatch.build(groups, ratio)


@dataclass
class AttentionStats:
    """Score elements per step (query rows x keys, per head and layer): handed to the
    kernels (`padded`) against the real ones (each page's rows x its own keys)."""
    steps: int = 0
    blocked_steps: int = 0
    real: int = 0
    padded: int = 0
    buckets: int = 0
    waste: list[float] = field(default_factory=list)  # per step: padded / real

    def add(self, real: int, padded: int, buckets: int = 0) -> None:
        self.steps += 1
        self.blocked_steps += buckets > 0
        self.real += real
        self.padded += padded
        self.buckets += buckets
        self.waste.append(padded / real if real else 1.0)

    def figures(self) -> dict[str, float | int | None]:
        w = sorted(self.waste)
        return {
            "attention_steps": self.steps,
            "attention_blocked_steps": self.blocked_steps,
            "attention_padding": self.padded / self.real if self.real else None,  # over the run
            "attention_padding_median": w[len(w) // 2] if w else None,  # per step
            "attention_padding_max": w[-1] if w else None,
            "attention_buckets_per_step": self.buckets / self.blocked_steps if self.blocked_steps else None,
        }
