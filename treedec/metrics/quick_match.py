"""Matching ground-truth text and formulas to predicted blocks: OmniDocBench's quick match.

1. Both sides are normalized (text: `normalize_text`, formulas: `normalize_formula`);
   empty ones are left out.
2. Ignored categories (captions, headers, page numbers, ...) are matched first: every
   prediction within 0.25 of one of them is taken out of the pool.
3. Consecutive predictions that together fit one ground truth are joined
   (`join_split_predictions`), then a minimum-cost assignment (Hungarian) on normalized
   edit distance pairs the rest; pairs costlier than 0.7 are undone.
4. A ground truth left over that fits inside some prediction (best window < 0.4) joins
   that prediction's match; what is still left is paired by a second assignment.
5. Several ground truths matched to one prediction form one match.

Positions for reading order are read as the official tool reads them: by index in the
lists before step 1's filtering (so an empty block shifts the positions after it).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from treedec.metrics.assignment import assign, distance_matrix
from treedec.metrics.blocks import FORMULA, TEXT, GtItem, PredBlock
from treedec.metrics.formula_arrays import split_gt_arrays, split_pred_arrays
from treedec.metrics.gt_items import IGNORED
from treedec.metrics.normalize import normalize_formula, normalize_text
from treedec.metrics.split_predictions import CLOSE, join_split_predictions
from treedec.metrics.edit_distance import best_window_distance

TOO_FAR = 0.7  # an assigned pair costlier than this is undone
FITS_INSIDE = 0.4  # a left-over ground truth this close to a window of a prediction joins it


@dataclass
class GtLine:
    raw: str
    norm: str
    category: str
    order: float | str  # reading-order key; "" when unknown


@dataclass
class PredLine:
    raw: str
    norm: str
    position: int
    kind: str


@dataclass
class Match:
    """Ground-truth lines and the prediction lines matched to them (either may be empty)."""
    gt: list[int]
    pred: list[int]
    gt_category: str
    norm_gt: str
    norm_pred: str
    gt_raw: str
    pred_kind: str | None  # kind of the first prediction, None when unmatched
    gt_orders: list = field(default_factory=list)
    pred_position: int | None = None


def _gt_lines(items: list[GtItem]) -> list[GtLine]:
    kept = []
    for item in items:
        norm = normalize_formula(item.content) if item.category == "equation_isolated" else normalize_text(item.content)
        if item.content and norm:
            kept.append((item.content, norm, item.category))
    # order read from the unfiltered list at the filtered index, as the official tool does
    return [GtLine(raw, norm, cat, items[i].order or "") for i, (raw, norm, cat) in enumerate(kept)]


def _pred_norm(block: PredBlock) -> str:
    return {TEXT: normalize_text, FORMULA: normalize_formula}.get(block.kind, str)(block.content)


def _pred_lines(blocks: list[PredBlock]) -> list[PredLine]:
    kept = [(b.content, norm) for b in blocks if b.content and (norm := _pred_norm(b))]
    # position and kind read from the unfiltered list at the filtered index, as officially
    return [PredLine(raw, norm, blocks[i].position, blocks[i].kind) for i, (raw, norm) in enumerate(kept)]


def _formula_array(raws: list[str]) -> str:
    rows = " \\\\ ".join("{" + r.strip("$").strip("\n") + "}" for r in raws)
    return "\\begin{array}{l} " + rows + " \\end{array}"


def _match(gts: list[GtLine], preds: list[PredLine], gi: list[int], pi: list[int]) -> Match:
    cats = [gts[i].category for i in gi]
    category = Counter([c for c in cats if c not in IGNORED] or cats).most_common(1)[0][0]
    raws = [gts[i].raw for i in gi]
    gt_raw = _formula_array(raws) if category == "equation_isolated" and len(gi) > 1 else "".join(raws)
    return Match(gi, pi, category, "".join(gts[i].norm for i in gi), "".join(preds[k].norm for k in pi), gt_raw,
                 preds[pi[0]].kind if pi else None, [gts[i].order for i in gi],
                 preds[pi[0]].position if pi else None)


def _taken_by_ignored(gts: list[GtLine], preds: list[PredLine]) -> set[int]:
    ignored = [g.norm for g in gts if g.category in IGNORED]
    if not ignored:
        return set()
    cost = distance_matrix(ignored, [p.norm for p in preds])
    return {int(j) for _, j in np.argwhere(cost < CLOSE)}


def _assigned(gts: list[str], preds: list[str]) -> tuple[dict[int, list[int]], list[int]]:
    """Step 3: ground truth -> run of predictions; and the ground truths left over."""
    columns = join_split_predictions(distance_matrix(gts, preds), gts, preds)
    cost = distance_matrix(gts, [" ".join(preds[k] for k in col) for col in columns])
    pairs = dict(assign(cost))
    matched: dict[int, list[int]] = {}
    left: list[int] = []
    for g in range(len(gts)):
        if g in pairs and cost[g, pairs[g]] <= TOO_FAR:
            col = columns[pairs[g]]
            matched[g] = list(range(col[0], col[-1] + 1))
        else:
            left.append(g)
    return matched, left


def _groups(matched: dict[int, list[int]], inside: dict[int, list[int]]) -> dict[tuple, list[int]]:
    """Prediction run -> ground truths; assigned pairs first, then left-overs that fit inside."""
    groups: dict[tuple, list[int]] = {}
    done: set[int] = set()
    for g, run in matched.items():
        groups.setdefault(tuple(sorted(run)), []).append(g)
        done.add(g)
    for p, gs in inside.items():
        fresh = [g for g in gs if g not in done]
        groups.setdefault((p,), []).extend(fresh)
        done.update(fresh)
    return groups


def _pair_rest(groups: dict[tuple, list[int]], gts: list[str], preds: list[str]) -> list[tuple[int, list[int]]]:
    """(ground truth, predictions) pairs: the groups', then a second assignment between
    the ground truths and predictions in no group (iterated as Python sets, as the
    official tool does, since ties follow that order)."""
    pairs = [(g, list(run)) for run, gs in groups.items() for g in sorted(set(gs))]
    free_gts = list(set(range(len(gts))) - {g for gs in groups.values() for g in gs})
    free_preds = list(set(range(len(preds))) - {p for run in groups for p in run})
    if free_gts and free_preds:
        cost = distance_matrix([gts[g] for g in free_gts], [preds[p] for p in free_preds])
        pairs += [(free_gts[i], [free_preds[j]]) for i, j in assign(cost)]
    return pairs


def _main_pass(gts: list[str], preds: list[str]) -> list[tuple[list[int], list[int]]]:
    """Matches as (ground truths, predictions), in the official order; unmatched ground
    truths come last with no prediction."""
    matched, left = _assigned(gts, preds)
    inside = {}
    for p, pred in enumerate(preds):
        fits = [g for g in left if (d := best_window_distance(pred, gts[g])) is not None and d < FITS_INSIDE]
        if fits:
            inside[p] = fits
    by_run: dict[tuple, list[int]] = {}
    for g, run in _pair_rest(_groups(matched, inside), gts, preds):
        by_run.setdefault(tuple(run), []).append(g)
    out = [(gs, list(run)) for run, gs in by_run.items()]
    done = {g for gs, _ in out for g in gs}
    return out + [([g], []) for g in range(len(gts)) if g not in done]


def _prepare(gt_items: list[GtItem], pred_blocks: list[PredBlock]) -> tuple[list[GtLine], list[PredLine]]:
    """The lines the matcher compares: arrays split, predictions ordered (inline formulas
    last), empty lines left out."""
    ordered = sorted(pred_blocks, key=lambda b: (b.inline, b.position))
    return _gt_lines(split_gt_arrays(gt_items)), _pred_lines(split_pred_arrays(ordered))


def quick_match(gt_items: list[GtItem], pred_blocks: list[PredBlock]) -> list[Match]:
    """Matches of a page's text and formula ground truth (predictions matched to
    nothing are not returned: they never count)."""
    gts, preds = _prepare(gt_items, pred_blocks)
    if not gts:
        return []
    if not preds:
        return [_match(gts, preds, [i], []) for i in range(len(gts))]
    if len(gts) == 1 and len(preds) == 1:
        return [_match(gts, preds, [0], [0])]
    taken = _taken_by_ignored(gts, preds)
    main_g = [i for i, g in enumerate(gts) if g.category not in IGNORED]
    main_p = [k for k in range(len(preds)) if k not in taken]
    found = _main_pass([gts[i].norm for i in main_g], [preds[k].norm for k in main_p])
    return [_match(gts, preds, [main_g[g] for g in gs], [main_p[p] for p in ps]) for gs, ps in found]
