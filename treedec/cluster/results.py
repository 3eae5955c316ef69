"""A Ray pass's results: the decoders' batch runs merged into one `RunResult` (`merged`)."""
from __future__ import annotations

from treedec.records import PageRecord, RunResult


def merged(runs: list[RunResult], records: list[PageRecord], wall_s: float, strategy: str) -> RunResult:
    """The decoders' batch runs as one: their records in the data's order, the pass's wall time
    (the driver's), phases, forward passes and warm-ups summed over the decoders, notes once."""
    phases: dict[str, float] = {}
    for r in runs:
        for k, v in r.phases.items():
            phases[k] = phases.get(k, 0.0) + v
    first = runs[0] if runs else None
    return RunResult(strategy=first.strategy if first else strategy, records=records, wall_s=wall_s,
                     forward_passes=sum(r.forward_passes for r in runs), phases=phases,
                     warmup_s=sum(r.warmup_s for r in runs), drafts=first.drafts if first else None,
                     runtime=first.runtime if first else "embedded",
                     notes=list(dict.fromkeys(n for r in runs for n in r.notes)),
                     attention=first.attention if first else {})

