"""How many crops a stage's run holds in flight: a page in flight brings all its crops.

`runtime.max_pages` counts pages. A stage that reads a page's regions from crops (`crops`' read
stage, HSD's stage 1) runs them as items of their own, so its run takes `max_pages` x the most
crops of a page: at one page in flight, that page's crops are read together, as its streams are
decoded together by `padoc`. (Until 2026-12-04 HSD's stage 1 took `max_pages` crops, one at a time
at one page in flight, while `crops` took a page's crops together.) Where the crops come as the
pages are drafted (drafting beside the model's runs) their count is not known when the run starts:
`UNKNOWN_PER_PAGE` a page is assumed."""
from __future__ import annotations

from treedec.runtimes.base import Runtime

UNKNOWN_PER_PAGE = 64


def crops_in_flight(runtime: Runtime, per_page: int | None) -> int:
    """Crops in flight for a run of crops whose pages hold at most `per_page` crops (None: not known)."""
    return max(1, (UNKNOWN_PER_PAGE if per_page is None else per_page) * runtime.cfg.max_pages)
