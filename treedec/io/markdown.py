"""`Page` -> Markdown, as end-to-end parsers write it: tables as HTML, display formulas as $$...$$."""
from __future__ import annotations

from treedec.page import Page

SKIPPED = frozenset({"figure", "text_mask", "table_mask"})


def page_to_markdown(page: Page, include_page_furniture: bool = True) -> str:
    """Blocks in reading order, one paragraph each. Headers, footers and page numbers are
    kept unless `include_page_furniture` is False (OmniDocBench ignores them when scoring)."""
    furniture = {"header", "footer", "page_number", "page_footnote", "abandon"}
    parts: list[str] = []
    for b in page.reading_order():
        if b.category in SKIPPED or not b.content.strip():
            continue
        if not include_page_furniture and b.category in furniture:
            continue
        text = b.content.strip()
        if b.category == "title":
            text = "# " + " ".join(text.split())
        elif b.category == "equation_isolated":
            text = f"$$\n{text}\n$$"
        parts.append(text)
    return "\n\n".join(parts) + "\n"
