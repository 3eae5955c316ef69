"""Where layout F1 is lost: each annotated block that the F1 pairing leaves unmatched, and
each predicted block it leaves over, sorted into one kind of error.

The pairing is layout F1's own (`pair_blocks`: greedy by IoU, same category, IoU >= 0.5), so the
errors account for the F1's misses exactly: each of the `annotated - matched` unmatched
blocks gets one error, and each of the `predicted - matched` unmatched predictions is the
prediction of a `category` or `box` error or an `extra`. An unmatched annotated block is,
in this order:

- `category A -> B`: an unmatched prediction of another category covers it (IoU >= 0.5);
  that prediction is used up (it is the same mistake, not also an `extra`);
- `box A`: an unmatched prediction of its category overlaps it, too little (a box a row
  too tall, short or shifted);
- `missed A`: nothing of its category overlaps it.

Each prediction left over after that is `extra B`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from treedec.metrics.layout import IOU_THRESHOLD, iou, pair_blocks
from treedec.page import Block, Page


@dataclass(frozen=True)
class LayoutError:
    kind: str  # "category", "box", "missed" or "extra"
    category: str  # the annotated block's (the predicted block's for "extra")
    predicted: str | None = None  # the category predicted instead ("category" errors)
    gt: Block | None = None
    pred: Block | None = None
    iou: float = 0.0

    @property
    def label(self) -> str:
        return f"category {self.category} -> {self.predicted}" if self.kind == "category" else f"{self.kind} {self.category}"


def layout_errors(pred: Page, gt: Page, threshold: float = IOU_THRESHOLD) -> list[LayoutError]:
    """The errors of one page (predicted boxes scaled to the ground truth's page size)."""
    pairing = pair_blocks(pred, gt, threshold)
    preds, pbox = pairing.preds, pairing.pred_boxes
    used_p, used_g = set(pairing.matched), set(pairing.matched.values())
    errors: list[LayoutError] = []
    for j, g in enumerate(pairing.gts):
        if j in used_g:
            continue
        free = [(iou(pbox[i], g.bbox), i) for i in range(len(preds)) if i not in used_p]
        other = max(((v, i) for v, i in free if preds[i].category != g.category), default=(0.0, -1))
        same = max(((v, i) for v, i in free if preds[i].category == g.category), default=(0.0, -1))
        if other[0] >= threshold:
            used_p.add(other[1])
            errors.append(LayoutError("category", g.category, preds[other[1]].category, g, preds[other[1]], other[0]))
        elif same[0] > 0:
            errors.append(LayoutError("box", g.category, None, g, preds[same[1]], same[0]))
        else:
            errors.append(LayoutError("missed", g.category, None, g))
    boxed = {id(e.pred) for e in errors if e.kind == "box"}
    errors += [LayoutError("extra", p.category, None, None, p) for i, p in enumerate(preds)
               if i not in used_p and id(p) not in boxed]
    return errors


def tally(errors: list[LayoutError]) -> Counter:
    return Counter(e.label for e in errors)
