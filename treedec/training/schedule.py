"""Learning-rate schedule and the data curriculum."""
from __future__ import annotations

import math
from typing import Any


def lr_at(step: int, lr: float, min_lr: float, warmup: int, total: int, restart: int = 0) -> float:
    """Linear warmup, then cosine decay to `min_lr` at `total` steps. `restart` > 0: a warm
    restart, the warmup and the cosine begin again at that step (steps before it follow the
    schedule from 0 to `restart`)."""
    if 0 < restart <= step:
        return lr_at(step - restart, lr, min_lr, warmup, total - restart)
    if 0 < restart:
        total = restart
    if step < warmup:
        return lr * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * t))


def stage_at(step: int, stages: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """The curriculum stage in force at `step`: stages are `{until: step, page: {...}}`,
    the last one lasting forever. Returns (index, its SynthConfig overrides)."""
    for i, st in enumerate(stages):
        if step < st.get("until", float("inf")) or i == len(stages) - 1:
            return i, dict(st.get("page", {}))
    return 0, {}
