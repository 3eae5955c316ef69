"""One engine step's batch: every stream with work, flattened once into the tensors the model
takes (token ids, positions, the rows whose logits are read) and the spans its attention is
written from (`treedec.engine.step_attention`). Building it reserves the rows' KV slots in the
arena: a stream's pending tokens join the stream, its draft nodes' wait for the verdict."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from treedec.engine.draft import DraftTree
from treedec.engine.kv import KVArena
from treedec.engine.page_kv import PageKV
from treedec.engine.step_attention import Span, page_sizes, page_slots


@dataclass
class StreamWork:
    """One stream's part of a step: its tokens from `first` on (no KV yet), then its drafts."""
    page: PageKV
    sid: int
    first: int
    tree: DraftTree | None
    draft_slots: list[int] = field(default_factory=list)  # the draft nodes' KV slots (`build_batch`)

    @property
    def drafts(self) -> int:
        return len(self.tree) if self.tree else 0


@dataclass
class StepBatch:
    work: list[StreamWork]
    ids: torch.Tensor  # [N] each stream's pending tokens, then its draft nodes
    pos: torch.Tensor  # [N] graph position + page offset (a draft node: the last pending token's + its depth)
    keep: torch.Tensor  # [K] rows whose logits are read: each stream's last pending token, then its draft nodes
    spans: list[Span]  # per stream: its rows and the KV slots they see
    base: int  # arena slots before the step (the rows' KV is appended after them)
    owned: dict[int, torch.Tensor]  # page id -> its slots below `base`
    real: int  # score elements the step needs: each page's rows x its own keys
    # the forward's (`Engine._forward`): what its attention was handed, and its seconds
    attn: int = 0  # score elements handed to the kernels
    buckets: int = 0  # page-blocked attention: buckets of similar pages (0: one dense mask)
    forward: tuple[float, float] = (0.0, 0.0)  # (wall, CPU) seconds of the model's forward

    @property
    def rows(self) -> int:
        return len(self.ids)

    @property
    def dense(self) -> int:
        """Score elements of one dense mask: every row against the whole arena and the rows."""
        return self.rows * (self.base + self.rows)

    @property
    def blocked(self) -> bool:
        return self.buckets > 0


def build_batch(work: list[StreamWork], arena: KVArena) -> StepBatch:
    base = arena.size
    n_new = sum(len(w.page.graph[w.sid].tokens) - w.first + w.drafts for w in work)
    ids = torch.empty(n_new, dtype=torch.long)
    pos = torch.empty(n_new, dtype=torch.long)
    spans: list[Span] = []
    keep: list[int] = []
    row = 0
    for w in work:
        n, d = _fill(w, ids, pos, row)
        spans.append(Span(w.page.pid, row, n, w.tree, w.page.visible(w.sid)))
        slots = arena.reserve(n + d, w.page.pid)
        w.page.slots[w.sid].extend(slots[:n])
        w.draft_slots = slots[n:]
        keep.extend(range(row + n - 1, row + n + d))
        row += n + d
    owned = page_slots(arena.owner, base)
    real = sum(r * k for r, k in page_sizes(spans, owned))
    return StepBatch(work, ids, pos, torch.tensor(keep), spans, base, owned, real)


def _fill(w: StreamWork, ids: torch.Tensor, pos: torch.Tensor, row: int) -> tuple[int, int]:
    """Write the stream's rows from `row`: its pending tokens, then its draft nodes; (pending, drafts)."""
    s, offset = w.page.graph[w.sid], w.page.offset
    n, d = len(s.tokens) - w.first, w.drafts
    ids[row:row + n] = torch.tensor(s.tokens[w.first:])
    pos[row:row + n] = torch.arange(s.start_pos + w.first, s.start_pos + len(s.tokens)) + offset
    if d:
        ids[row + n:row + n + d] = torch.tensor(w.tree.tokens)
        pos[row + n:row + n + d] = s.start_pos + len(s.tokens) - 1 + offset + torch.tensor(w.tree.depths())
    return n, d
