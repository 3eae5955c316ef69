"""A predicted `Page` -> blocks, directly (no Markdown round trip): its categories are known."""
from __future__ import annotations

from treedec.metrics.blocks import FORMULA, TABLE, TEXT, PredBlock
from treedec.page import Page

_NO_CONTENT = frozenset({"figure", "text_mask", "table_mask"})


def page_to_blocks(page: Page) -> list[PredBlock]:
    """One block per content block, positioned by reading order."""
    out = []
    for i, b in enumerate(page.reading_order()):
        if b.category in _NO_CONTENT:
            continue
        kind = {"table": TABLE, "equation_isolated": FORMULA}.get(b.category, TEXT)
        out.append(PredBlock(kind, b.content, i))
    return out
