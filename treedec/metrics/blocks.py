"""The blocks the matcher compares: predicted blocks and ground-truth items."""
from __future__ import annotations

from dataclasses import dataclass

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
