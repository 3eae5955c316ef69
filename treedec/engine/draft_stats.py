"""Per-depth acceptance of a run's drafts: from each page's `PageDecoding.by_depth` counts,
for each draft depth d, the share of verdicts on a draft reaching depth d that accepted it
down to depth d (`acceptance_by_depth`), and the summed counts (`drafts_by_depth`)."""
from __future__ import annotations

from typing import Any, Iterable


def depth_figures(pages: Iterable[list[list[int]]]) -> dict[str, Any]:
    total: list[list[int]] = []
    for counts in pages:
        for d, (proposed, accepted) in enumerate(counts):
            if d == len(total):
                total.append([0, 0])
            total[d][0] += proposed
            total[d][1] += accepted
    if not total:
        return {}
    return {"acceptance_by_depth": [round(a / p, 4) if p else None for p, a in total], "drafts_by_depth": total}
