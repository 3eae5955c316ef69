"""Page drafters for speculative decoding: a pipeline OCR turns a page image into a draft
`Page` (layout, text, tables, order) that HSD-style strategies speculate from.

The OCR packages are an optional extra (`pip install 'treedec[hsd]'`); importing this
package never imports them, and cached drafts load without them.
"""
from treedec.drafters.cache import cache_path, default_cache_dir, draft_pages, image_hash

__all__ = ["CDLA_TO_OMNIDOCBENCH", "DRAFTER_VERSION", "PipelineConfig", "PipelineOCR", "cache_path",
           "default_cache_dir", "draft_pages", "image_hash"]


def __getattr__(name):
    if name in ("CDLA_TO_OMNIDOCBENCH", "DRAFTER_VERSION", "PipelineConfig", "PipelineOCR"):
        from treedec.drafters import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'treedec.drafters' has no attribute {name!r}")
