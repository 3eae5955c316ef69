"""HSD's draft-target matching: find the stream's last w tokens in fixed drafts and
propose what follows them.

w starts at `w_min` and grows (up to `w_max`) while several places match; one match
proposes the rest of that draft (capped at `max_depth`); several build a prefix tree of
their continuations (depth <= `max_depth`, <= `max_nodes` nodes) verified in one forward.

`fuzzy` (treedec's extension, 0 = off as published): when no exact match is found, the
last `fuzzy` tokens may match a draft with one token different. A draft that misread one
character (case, 0/o) then goes on proposing right after the target corrected it, instead
of waiting `w_min` tokens for an exact match. Verification is exact, so a wrong proposal
costs compute only, never output.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
        w = self.w_min
        found = self._find(history[-w:], drafts)
        while len(found) > 1 and w < min(self.w_max, len(history)):
            longer = self._find(history[-(w + 1):], drafts)
            if not longer:
                break
            w, found = w + 1, longer
        return found

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
