"""Pack ground-truth decoding graphs (one or many pages) into one training sequence.

Every stream contributes its tokens but the last as inputs and its tokens but the first
as labels (the prompt's labels are ignored). Positions come from the graph (a branch
continues from its fork position). The `TreeLayout` tells attention which ancestor
prefixes each stream sees; the flat form is the special case of one stream per page.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from treedec.graph import DecodingGraph
from treedec.models.attention import Segment, TreeLayout

IGNORE = -100


@dataclass
class Packed:
    ids: torch.Tensor  # [L]
    positions: torch.Tensor  # [L]
    labels: torch.Tensor  # [L], IGNORE where no loss
    tree: TreeLayout

    @property
    def supervised(self) -> int:
        return int((self.labels != IGNORE).sum())


def pack(graphs: list[DecodingGraph], no_loss: list | None = None) -> Packed:
    """`no_loss[g]`: (stream, token index) pairs of graph `g` that no label predicts."""
    ids: list[int] = []
    pos: list[int] = []
    labels: list[int] = []
    segments: list[Segment] = []
    for gi, g in enumerate(graphs):
        skip = no_loss[gi] if no_loss else ()
        index: dict[int, int] = {}  # stream id -> segment index
        for s in g.streams:  # parents come before their children
            if len(s.tokens) < 2:
                raise ValueError(f"stream {s.id} has {len(s.tokens)} token(s); nothing to learn")
            n = len(s.tokens) - 1
            prefix = []
            for a, end in g.ancestors(s.id)[:-1]:
                if end > len(g[a].tokens) - 1:
                    raise ValueError(f"stream {s.id} forks from the last token of stream {a}")
                prefix.append((index[a], end))
            index[s.id] = len(segments)
            segments.append(Segment(len(ids), n, tuple(prefix)))
            ids += s.tokens[:-1]
            pos += range(s.start_pos, s.start_pos + n)
            labels += [t if i + 1 >= s.prompt_len and (s.id, i + 1) not in skip else IGNORE
                       for i, t in enumerate(s.tokens[1:])]
    return Packed(torch.tensor(ids), torch.tensor(pos), torch.tensor(labels), TreeLayout(tuple(segments)))


def flat_graph(prompt: list[int], target: list[int]) -> DecodingGraph:
    """One stream: the prompt followed by the target tokens."""
    g = DecodingGraph()
    g.root(prompt)
    g.append(0, target)
    g.finish(0)
    return g
