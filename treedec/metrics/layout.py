"""Layout detection quality: precision, recall and F1 of predicted boxes at IoU >= 0.5
with the same category, pairing greedily by IoU (each box used once)."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.boxes import Box, iou
from treedec.page import Block, Page

SKIPPED = frozenset({"text_mask", "table_mask"})
IOU_THRESHOLD = 0.5


@dataclass
class LayoutCounts:
    matched: int = 0
    predicted: int = 0
    annotated: int = 0

    def add(self, other: "LayoutCounts") -> None:
        self.matched += other.matched
        self.predicted += other.predicted
        self.annotated += other.annotated

    @property
    def precision(self) -> float | None:
        return self.matched / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.matched / self.annotated if self.annotated else None

    @property
    def f1(self) -> float | None:
        """2 TP / (2 TP + FP + FN): 0 when nothing was predicted on an annotated page."""
        total = self.predicted + self.annotated
        return 2 * self.matched / total if total else None


@dataclass
class LayoutPairing:
    """The blocks layout F1 scores (SKIPPED categories left out), the predicted boxes scaled
    to the ground truth's page size, and which prediction each matched annotated block got."""
    preds: list[Block]
    pred_boxes: list[Box]
    gts: list[Block]
    matched: dict[int, int]  # prediction index -> annotated block index


def pair_blocks(pred: Page, gt: Page, threshold: float = IOU_THRESHOLD) -> LayoutPairing:
    """Pair predicted and annotated blocks of the same category greedily by IoU, each once,
    while IoU >= threshold."""
    sx, sy = gt.width / pred.width, gt.height / pred.height
    preds = [b for b in pred.blocks if b.category not in SKIPPED]
    gts = [b for b in gt.blocks if b.category not in SKIPPED]
    boxes = [(b.bbox[0] * sx, b.bbox[1] * sy, b.bbox[2] * sx, b.bbox[3] * sy) for b in preds]
    candidates = sorted(((iou(boxes[i], g.bbox), i, j) for i, p in enumerate(preds)
                         for j, g in enumerate(gts) if p.category == g.category), reverse=True)
    matched: dict[int, int] = {}
    used_g: set[int] = set()
    for overlap, i, j in candidates:
        if overlap < threshold:
            break
        if i not in matched and j not in used_g:
            matched[i] = j
            used_g.add(j)
    return LayoutPairing(preds, boxes, gts, matched)


def layout_counts(pred: Page, gt: Page, threshold: float = IOU_THRESHOLD) -> LayoutCounts:
    """Counts for one page; predicted boxes are scaled to the ground truth's page size."""
    p = pair_blocks(pred, gt, threshold)
    return LayoutCounts(len(p.matched), len(p.preds), len(p.gts))
