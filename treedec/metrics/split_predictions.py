"""Joining consecutive predicted blocks that together match one ground-truth block
(a paragraph the model broke in two), before the assignment, as OmniDocBench does."""
from __future__ import annotations

import numpy as np

from treedec.metrics.edit_distance import normalized_edit_distance
from treedec.metrics.edit_distance import best_window_distance

CLOSE = 0.25  # a pair this close is taken as matched and never joined
FIT = 0.6  # each joined part must fit this well somewhere inside the ground truth


def _should_extend(gt: str, parts: list[str]) -> tuple[bool, bool]:
    """(join the last part, keep trying further parts)."""
    if len(parts) == 1:
        return False, False
    current, joined = " ".join(parts[:-1]), " ".join(parts)
    if normalized_edit_distance(gt, joined) > normalized_edit_distance(gt, current):
        return False, False
    for part in parts[:-1]:
        fit = best_window_distance(gt, part)
        if fit is None or fit > FIT:
            return False, False
    fit = best_window_distance(gt, parts[-1])
    if fit is None:
        return False, False
    return fit < FIT, len(joined) <= len(gt)


def _grow(gt: str, preds: list[str], first: int, taken: set[int]) -> list[int]:
    """Predictions first, first+1, ... joined while each addition helps."""
    step, parts = 1, [preds[first]]
    while first + step not in taken and first + step < len(preds):
        parts.append(preds[first + step])
        extend, keep_going = _should_extend(gt, parts)
        if not extend:
            break
        step += 1
        if not keep_going:
            break
    return list(range(first, first + step))


def _overlap(a: list[int], b: list[int]) -> bool:
    return bool(set(a) & set(b))


def _best_path(group: list[tuple[list[int], float]]) -> list[list[int]]:
    """Among overlapping candidate spans, the set of compatible spans with the lowest
    mean cost (built greedily, path by path, in the official order)."""
    paths = [[group[0]]]
    for span, cost in group[1:]:
        new_path = True
        for path in paths:
            clash = same = False
            k = 0
            while k < len(path):  # the path may change under the scan, as in the official loop
                if path[k][0] == span:
                    clash = same = True
                    if path[k][1] > cost:
                        path.pop(k)
                        path.append((span, cost))
                elif _overlap(path[k][0], span):
                    clash = True
                k += 1
            if not clash:
                path.append((span, cost))
                new_path = False
            if same:
                new_path = False
        if new_path:
            paths.append([(span, cost)])
    best, best_cost = [], float("inf")
    for path in paths:
        mean = sum(c for _, c in path) / len(path)
        if mean < best_cost:
            best, best_cost = [s for s, _ in path], mean
    return best


def _compatible_spans(spans: list[list[int]], costs: list[float]) -> list[list[int]]:
    """Spans grouped by overlap (in order of their first index); one best path per group."""
    if not spans:
        return []
    ranked = sorted(zip(spans, costs), key=lambda sc: sc[0][0])
    groups = [[ranked[0]]]
    for span, cost in ranked[1:]:
        if any(_overlap(span, other) for other, _ in groups[-1]):
            groups[-1].append((span, cost))
        else:
            groups.append([(span, cost)])
    out: list[list[int]] = []
    for group in groups:
        out += [group[0][0]] if len(group) == 1 else _best_path(group)
    return out


def _columns(n_preds: int, spans: list[list[int]]) -> list[list[int]]:
    columns: list[int | list[int]] = list(range(n_preds))
    for span in spans:
        if span[0] not in columns:
            continue
        at = columns.index(span[0])
        del columns[at:at + len(span)]
        columns.insert(at, span)
    return [c if isinstance(c, list) else [c] for c in columns]


def join_split_predictions(cost: np.ndarray, gts: list[str], preds: list[str]) -> list[list[int]]:
    """Columns for the assignment: each a run of consecutive prediction indices. For every
    ground truth without a close prediction, the best run starting at each free
    prediction is found; compatible best runs become joined columns."""
    close = np.argwhere(cost < CLOSE)
    taken_gt = {int(i) for i, _ in close}
    taken_pred = {int(j) for _, j in close}
    free_preds = [j for j in range(len(preds)) if j not in taken_pred]
    spans, costs = [], []
    for g in (i for i in range(len(gts)) if i not in taken_gt):
        best, best_cost = None, float("inf")
        for first in free_preds:
            span = _grow(gts[g], preds, first, taken_pred)
            d = normalized_edit_distance(gts[g], " ".join(preds[k] for k in span))
            if best is None or d < best_cost:
                best, best_cost = span, d
        if best is not None:
            spans.append(best)
            costs.append(best_cost)
    return _columns(len(preds), _compatible_spans(spans, costs))
