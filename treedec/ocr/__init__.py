"""Page OCR pipelines: a pipeline OCR turns a page image into a draft `Page` (layout, text,
tables, order) that HSD-style strategies speculate from (`treedec.drafters` turns such a
page into token drafts). `draft_pages` drafts a data set through a per-page cache.

The OCR packages are an optional extra (`pip install 'treedec[hsd]'`); importing this
package never imports them, and cached drafts load without them.
"""
from treedec.ocr.cache import cache_path, default_cache_dir, draft_pages, image_hash

__all__ = ["CDLA_TO_OMNIDOCBENCH", "DRAFTER_VERSION", "PipelineConfig", "PipelineOCR", "cache_path",
           "default_cache_dir", "draft_pages", "image_hash"]


def __getattr__(name):
    if name in ("CDLA_TO_OMNIDOCBENCH", "DRAFTER_VERSION", "PipelineConfig", "PipelineOCR"):
        from treedec.ocr import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'treedec.ocr' has no attribute {name!r}")
