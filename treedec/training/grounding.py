"""Grounding losses: teach a tiny VLM *where* to read (training only; the served model is
unchanged). From the reading probe (docs/results.md, "The shipped tiny model"), a tiny Idefics3 learns
to read only with:

- glyph and predecessor losses on every image token (what glyph is in this cell, and
  which character precedes it in reading order), through training-only heads;
- attention steering: one decoder head (`layer`, `head`) must put its attention on the
  cell of the character being predicted (-log p);
- readout: that head's output alone (its share of o_proj, final norm, LM head) must
  predict the character.

Targets need glyph cells aligned with the ViT patches (synthetic pages drawn on a grid of
`patch_size` cells, pixel-shuffle scale 1) and the per-character cells the generator
records (`Sample.cells`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from treedec.models.attention import TreeLayout


@dataclass
class GroundingConfig:
    layer: int = 1
    head: int = 0
    steer: float = 1.0  # weight of the attention-steering loss
    readout: float = 1.0  # weight of the readout loss
    glyph: float = 1.0  # weight of the glyph + predecessor losses
    vision_warmup: int = 200  # first steps: glyph + predecessor losses only (vision tower)
    enabled: bool = True


@dataclass
class Steer:
    """Rows to steer and their target keys (packed indices); filled by the attention call."""
    layer: int
    head: int
    rows: torch.Tensor  # [R] query rows (inputs that predict a grounded character)
    targets: torch.Tensor  # [R] key index of that character's image token
    logp: torch.Tensor | None = None  # [R] log attention on the target
    head_out: torch.Tensor | None = None  # [R, D] the head's attention output

    def observe(self, module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                scale: float) -> None:
        """Called by the attention function of every layer: on `self.layer`, the head's exact
        attention distribution (over all keys the row sees) for the steered rows."""
        if getattr(module, "layer_idx", None) != self.layer or len(self.rows) == 0:
            return
        kv_head = self.head // (query.shape[1] // key.shape[1])
        with torch.autocast(query.device.type, enabled=False):  # float32 even inside bf16 autocast
            q = query[0, self.head, self.rows].float()  # [R, D]
            k = key[0, kv_head].float()  # [L, D]
            v = value[0, kv_head].float()
            mask = visible_rows(tree, self.rows)
            s = (q @ k.T * scale).masked_fill(~mask, float("-inf"))
            logp = torch.log_softmax(s, -1)
            self.logp = logp.gather(1, self.targets[:, None])[:, 0]
            self.head_out = logp.exp() @ v


def visible_rows(tree: TreeLayout, rows: torch.Tensor) -> torch.Tensor:
    """[R, L] bool: the keys each packed row attends to (ancestor prefixes + own causal)."""
    L = tree.total
    out = torch.zeros(len(rows), L, dtype=torch.bool)
    starts = torch.tensor([s.start for s in tree.segments])
    seg_of = torch.searchsorted(starts, rows.cpu(), right=True) - 1
    for i, (r, si) in enumerate(zip(rows.tolist(), seg_of.tolist())):
        seg = tree.segments[si]
        out[i, seg.start:r + 1] = True
        for a, end in seg.prefix:
            anc = tree.segments[a]
            out[i, anc.start:anc.start + end] = True
    return out.to(rows.device)


@dataclass
class Targets:
    """Grounding targets of one packed batch."""
    rows: list[int] = field(default_factory=list)  # packed input rows predicting a grounded char
    keys: list[int] = field(default_factory=list)  # packed index of that char's image token
    chars: list[int] = field(default_factory=list)  # the char's token id
    glyph: list[torch.Tensor] = field(default_factory=list)  # per image: [N] glyph id per cell (pad = blank)
    pred: list[torch.Tensor] = field(default_factory=list)  # per image: [N] previous char id (-100 = none)


def image_labels(sample, tok, grid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image token (row-major cells): the glyph drawn there and the char before it."""
    glyph = torch.full((grid * grid,), tok.pad_id, dtype=torch.long)
    pred = torch.full((grid * grid,), -100, dtype=torch.long)
    for b, cells in sample.cells.items():
        ids = tok.encode(sample.page.blocks[b].content)
        if len(ids) != len(cells):
            continue
        for j, (t, cell) in enumerate(zip(ids, cells)):
            if cell is None or not (0 <= cell[0] < grid and 0 <= cell[1] < grid):
                continue
            idx = cell[0] * grid + cell[1]
            glyph[idx] = t
            pred[idx] = ids[j - 1] if j else tok.child_id
    return glyph, pred


def content_rows(graph, tok) -> list[tuple[int, int, int, int]]:
    """(stream, index in stream, block number, char index) of every content token of a
    page graph, for the flat form (one stream) and the tree form (a branch per block)."""
    out = []
    if len(graph) == 1:
        s = graph[0]
        block = -1
        in_content = False
        j = 0
        for i, t in enumerate(s.tokens):
            if t == tok.block_id:
                block, in_content = block + 1, False
            elif t == tok.child_id:
                in_content, j = True, 0
            elif t == tok.eos_id:
                in_content = False
            elif in_content:
                out.append((0, i, block, j))
                j += 1
        return out
    for k, c in enumerate(graph.children(0)):
        s = graph[c]
        out += [(c, i, k, i - 1) for i in range(1, len(s.tokens)) if s.tokens[i] != tok.eos_id]
    return out
