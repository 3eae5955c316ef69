"""HSD's draft-target matching: find the stream's last w tokens in fixed drafts and
propose what follows them.

w starts at `w_min` and grows (up to `w_max`) while several places match; one match
proposes the rest of that draft (capped at `max_depth`); several build a prefix tree of
their continuations (depth <= `max_depth`, <= `max_nodes` nodes) verified in one forward.

The match (`longest_matches`) is written once; `NgramMatcher` scans the drafts it is given,
`NgramIndex` looks fixed drafts up by their `w_min`-grams (the vLLM proposer's, which sees
every request's context every step).

`fuzzy` (treedec's extension, 0 = off as published): when no exact match is found, the
last `fuzzy` tokens may match a draft with one token different. A draft that misread one
character (case, 0/o) then goes on proposing right after the target corrected it, instead
of waiting `w_min` tokens for an exact match. Verification is exact, so a wrong proposal
costs compute only, never output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from treedec.engine.draft import DraftTree


@dataclass
class NgramMatcher:
    w_min: int = 3
    w_max: int = 10
    max_depth: int = 15
    max_nodes: int = 128
    fuzzy: int = 0
    _arrays: dict = field(default_factory=dict, repr=False, compare=False)  # id(draft) -> (draft, its array)

    def matches(self, history: list[int], drafts: list[list[int]]) -> list[tuple[int, int]]:
        """(draft, index after the match) of every occurrence of the longest suffix of
        `history` (w_min..w_max tokens) that still matches somewhere."""
        if len(history) < self.w_min:
            return []
        return longest_matches(history, drafts, self._find(history[-self.w_min:], drafts), self.w_min, self.w_max)

    @staticmethod
    def _find(suffix: list[int], drafts: list[list[int]]) -> list[tuple[int, int]]:
        n = len(suffix)
        out = []
        for d, seq in enumerate(drafts):
            first = suffix[0]
            for j in range(len(seq) - n + 1):
                if seq[j] == first and seq[j:j + n] == suffix:
                    out.append((d, j + n))
        return out

    def near_matches(self, history: list[int], drafts: list[list[int]]) -> list[tuple[int, int]]:
        """(draft, index after) where the last `fuzzy` tokens of `history` match with exactly
        one token different."""
        n = self.fuzzy
        if n < 2 or len(history) < n:
            return []
        suffix = np.asarray(history[-n:])
        out = []
        for d, seq in enumerate(drafts):
            if len(seq) < n:
                continue
            windows = np.lib.stride_tricks.sliding_window_view(self._array(seq), n)
            out += [(d, int(j) + n) for j in np.flatnonzero((windows != suffix).sum(axis=1) == 1)]
        return out

    def _array(self, seq: list[int]) -> np.ndarray:
        hit = self._arrays.get(id(seq))
        if hit is None or hit[0] is not seq or len(hit[1]) != len(seq):
            if len(self._arrays) > 4096:
                self._arrays.clear()
            hit = self._arrays[id(seq)] = (seq, np.asarray(seq))
        return hit[1]

    def propose(self, history: list[int], drafts: list[list[int]]) -> DraftTree | None:
        found = [(d, j) for d, j in self.matches(history, drafts) if j < len(drafts[d])]
        if not found and self.fuzzy:
            found = [(d, j) for d, j in self.near_matches(history, drafts) if j < len(drafts[d])]
        return prefix_tree([drafts[d][j:j + self.max_depth] for d, j in found], self.max_nodes)


def longest_matches(history: list[int], drafts: list[list[int]], found: list[tuple[int, int]], w_min: int,
                    w_max: int) -> list[tuple[int, int]]:
    """HSD's window rule: from `found`, the (draft, index after) places where `history`'s
    last `w_min` tokens occur, keep those that the longest suffix (up to `w_max` tokens)
    still matches, growing w one token at a time while several places match."""
    w, limit = w_min, min(w_max, len(history))
    while len(found) > 1 and w < limit:
        t = history[-(w + 1)]
        longer = [(d, j) for d, j in found if j > w and drafts[d][j - w - 1] == t]
        if not longer:
            break
        w, found = w + 1, longer
    return found


class NgramIndex:
    """Fixed draft sequences indexed by their `w_min`-grams: `matches(history)` returns what
    `NgramMatcher(w_min, w_max).matches(history, drafts)` returns, without scanning every
    draft for every call."""

    def __init__(self, drafts: Iterable[Iterable[int]], w_min: int = 3, w_max: int = 10):
        if w_min < 1:
            raise ValueError(f"w_min must be >= 1, got {w_min}")
        self.drafts = [[int(t) for t in d] for d in drafts]
        self.w_min, self.w_max = w_min, max(w_min, w_max)
        self.index: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for d, seq in enumerate(self.drafts):
            for j in range(len(seq) - w_min + 1):
                self.index.setdefault(tuple(seq[j:j + w_min]), []).append((d, j + w_min))

    def matches(self, history: list[int]) -> list[tuple[int, int]]:
        if len(history) < self.w_min:
            return []
        found = self.index.get(tuple(history[-self.w_min:]), [])
        return longest_matches(history, self.drafts, found, self.w_min, self.w_max)


def prefix_tree(continuations: list[list[int]], max_nodes: int = 128) -> DraftTree | None:
    """Candidate continuations as one draft tree: one node per distinct prefix (so equal
    continuations cost nothing twice), at most `max_nodes` nodes; None when there are none."""
    continuations = [c for c in continuations if c]
    if not continuations:
        return None
    if len(continuations) == 1:
        return DraftTree.chain(continuations[0])
    tokens: list[int] = []
    parents: list[int] = []
    index: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
    for cont in continuations:
        parent = -1
        for t in cont:
            node = index.get((parent, t))
            if node is None:
                if len(tokens) >= max_nodes:
                    break
                node = len(tokens)
                tokens.append(t)
                parents.append(parent)
                index[(parent, t)] = node
            parent = node
    return DraftTree(tokens, parents)
