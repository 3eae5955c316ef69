"""Cost matrices of normalized edit distances and minimum-cost assignment (Hungarian)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from treedec.metrics.edit_distance import normalized_edit_distance


def distance_matrix(gts: Sequence[str], preds: Sequence[str]) -> np.ndarray:
    """[i, j] = normalized edit distance of gts[i] and preds[j]."""
    out = np.zeros((len(gts), len(preds)))
    for i, g in enumerate(gts):
        for j, p in enumerate(preds):
            out[i, j] = normalized_edit_distance(g, p)
    return out


def assign(cost: np.ndarray | list[list[float]]) -> list[tuple[int, int]]:
    """Row-column pairs of a minimum-cost assignment, by row (scipy's solver, so ties
    are broken as the official tool breaks them)."""
    rows, cols = linear_sum_assignment(cost)
    return [(int(r), int(c)) for r, c in zip(rows, cols)]
