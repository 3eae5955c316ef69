"""The blocks the matcher compares: predicted blocks and ground-truth items; a predicted
`Page` as blocks, directly (no Markdown round trip: its categories are known)."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.page import Page

TEXT, FORMULA, TABLE, LATEX_TABLE = "text", "formula", "table", "latex_table"


@dataclass
class PredBlock:
    """One block of a prediction. `position` orders blocks (a character offset in the
    Markdown, or the index in a predicted page); `inline` marks `$...$` math found in
    running text, which OmniDocBench also offers to the matcher as a formula."""
    kind: str  # TEXT, FORMULA, TABLE (HTML) or LATEX_TABLE
    content: str
    position: int
    inline: bool = False


@dataclass
class GtItem:
    """One ground-truth block as the matcher sees it (truncated blocks already merged)."""
    category: str
    content: str  # text, LaTeX for equation_isolated, HTML for table
    order: float | None = None
    latex: str = ""  # a table's LaTeX, when the ground truth has it


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
