"""A Ray pass's results: the decoders' batch runs merged into one `RunResult` (`merged`), and
the record of a page whose decoding raised (`failed`: written flagged, never dropped)."""
from __future__ import annotations

from treedec.page import Page
from treedec.records import PageRecord, RunResult, sample_flags, sample_size


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


def failed(sample, error: BaseException) -> PageRecord:
    """The record of a page whose decoding raised: empty, flagged with the error, kept."""
    width, height = sample_size(sample) or ((sample.page.width, sample.page.height) if sample.page else (1000, 1000))
    return PageRecord(sample.name, Page(width, height, image_path=sample.name), "", gt=sample.page,
                      flags=sample_flags(sample) + [f"decoding failed: {type(error).__name__}: {error}",
                                                    "not decoded, scored as empty" if sample.page is not None
                                                    else "not decoded"])
