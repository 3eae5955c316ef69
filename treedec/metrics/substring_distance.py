"""How well a short string fits somewhere inside a longer one."""
from __future__ import annotations

from treedec.metrics.edit_distance import edit_distance


def best_window_distance(long: str, short: str) -> float | None:
    """Min over windows of `long` of len(short) of edits(window, short) / len(short);
    None unless len(long) >= len(short) > 0."""
    n = len(short)
    if not (len(long) >= n > 0):
        return None
    return min(edit_distance(long[i:i + n], short) for i in range(len(long) - n + 1)) / n
