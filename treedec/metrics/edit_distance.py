"""Normalized Levenshtein distance and its OmniDocBench aggregations.

A sample's distance is edits / max(len(gt), len(pred)). A page's figure is the sum of its
samples' edits over the sum of their max-lengths; the data set's figures are the mean of
page figures (`page_avg`) and the same ratio over all samples (`whole`). `best_window_distance`:
how well a short string fits somewhere inside a longer one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import Levenshtein


def edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    return Levenshtein.distance(a, b)


def normalized_edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Edits / max length; 0.0 for two empty sequences."""
    longest = max(len(a), len(b))
    return edit_distance(a, b) / longest if longest else 0.0


@dataclass
class EditTally:
    """Running sums of edits and max-lengths."""
    edits: int = 0
    length: int = 0
    samples: int = 0

    def add(self, gt: Sequence[Hashable], pred: Sequence[Hashable]) -> None:
        self.edits += edit_distance(gt, pred)
        self.length += max(len(gt), len(pred))
        self.samples += 1

    def merge(self, other: "EditTally") -> None:
        self.edits += other.edits
        self.length += other.length
        self.samples += other.samples

    @property
    def ratio(self) -> float | None:
        """edits / length, or None when there is nothing to compare."""
        return self.edits / self.length if self.length else None


def page_average(tallies: Sequence[EditTally]) -> float | None:
    """Mean of the pages' ratios, over pages that have one."""
    ratios = [t.ratio for t in tallies if t.ratio is not None]
    return sum(ratios) / len(ratios) if ratios else None


def whole(tallies: Sequence[EditTally]) -> float | None:
    """All edits over all lengths."""
    total = EditTally()
    for t in tallies:
        total.merge(t)
    return total.ratio


def best_window_distance(long: str, short: str) -> float | None:
    """Min over windows of `long` of len(short) of edits(window, short) / len(short);
    None unless len(long) >= len(short) > 0."""
    n = len(short)
    if not (len(long) >= n > 0):
        return None
    return min(edit_distance(long[i:i + n], short) for i in range(len(long) - n + 1)) / n
