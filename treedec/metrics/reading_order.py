"""Reading-order edit distance of one page.

The ground-truth orders of the matched text blocks, taken in the order of their matched
predictions, are compared with the same orders sorted (Levenshtein over the sequences,
divided by the longer length). Unmatched ground truth counts on the ground-truth side only.
"""
from __future__ import annotations

from treedec.metrics.gt_items import SCORED_TEXT
from treedec.metrics.quick_match import Match


def order_sequences(matches: list[Match]) -> tuple[list, list]:
    """(ground-truth orders sorted, the same in predicted order), from text matches."""
    text = [m for m in matches if m.gt_category in SCORED_TEXT and m.gt_orders != [""]]
    paired = sorted(((m.pred_position, m.gt_orders) for m in text if m.pred_position is not None),
                    key=lambda pm: pm[0])
    gt = sorted(o for m in text for o in m.gt_orders if o)
    pred = [o for _, orders in paired for o in orders if o]
    return gt, pred
