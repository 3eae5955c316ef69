"""Where a strategy's draft pages come from, by `strategy.drafts`: the pipeline OCR (made now,
read from and written to a draft cache), the ground truth (`oracle`: an upper bound, for
analysis) or a folder of drafts made beforehand (`python -m treedec draft`; `treedec.ocr.folder`).
HSD drafts its pages with it, and `crops` in a format whose layout comes from a detector takes
the pipeline's layout from it."""
from __future__ import annotations


def draft_pages(samples, source: str, cache_dir: str | None, ocr=None, progress: bool = True,
                drafters=None) -> dict:
    """Page name -> draft `Page`, for the samples with an image (`oracle`: with a ground truth)."""
    if source == "oracle":  # ground truth as drafts: an upper bound, for analysis
        return {s.name: s.page for s in samples if s.page is not None}
    if source != "pipeline":  # a folder of drafts made beforehand (`python -m treedec draft`)
        from treedec.ocr.folder import read_drafts

        return read_drafts(samples, source)
    from treedec.ocr.cache import draft_pages as pipeline_pages

    return pipeline_pages([s for s in samples if s.image is not None], cache_dir, config=ocr, progress=progress,
                          drafters=drafters)
