"""Axis-aligned boxes (x1, y1, x2, y2) and how much two overlap: shared by the metrics and the
pipeline drafter, in a module of its own so that the drafter's start-up does not import the
metrics package (scipy among them: 0.35 CPU-s of every drafting process)."""
from __future__ import annotations

Box = tuple[float, float, float, float]


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes (0 when they do not overlap)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
