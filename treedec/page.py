"""Pages and blocks: the plain data every other part of treedec reads and writes.

A `Page` holds its blocks in reading order; a `Block` has an OmniDocBench category,
a pixel box and one content string (text, LaTeX for display formulas, HTML for tables).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# OmniDocBench block-level categories.
TEXT_CATEGORIES = (
    "title", "text_block", "figure_caption", "figure_footnote", "table_caption",
    "table_footnote", "equation_caption", "header", "footer", "page_number",
    "page_footnote", "abandon", "code_txt", "code_txt_caption", "reference", "code_algorithm",
    "code_algorithm_caption",
)
CATEGORIES = TEXT_CATEGORIES + ("figure", "table", "equation_isolated", "text_mask", "table_mask")
CONTENT_FIELD = {"table": "html", "equation_isolated": "latex"}  # all others: "text"


def content_field(category: str) -> str:
    return CONTENT_FIELD.get(category, "text")


@dataclass
class Block:
    category: str
    bbox: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels
    content: str = ""
    order: int | None = None
    ignore: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # unknown OmniDocBench fields, kept verbatim

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown block category {self.category!r}; known: {', '.join(CATEGORIES)}")
        x1, y1, x2, y2 = (float(v) for v in self.bbox)
        self.bbox = (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))

    @property
    def field(self) -> str:
        return content_field(self.category)


@dataclass
class Page:
    width: int
    height: int
    blocks: list[Block] = field(default_factory=list)
    image_path: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # the rest of page_info
    relations: list[dict[str, Any]] = field(default_factory=list)  # OmniDocBench extra.relation

    def __post_init__(self):
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"page size must be positive, got {self.width}x{self.height}")

    @property
    def name(self) -> str:
        stem = self.image_path.rsplit("/", 1)[-1]
        return stem.rsplit(".", 1)[0] if "." in stem else stem

    def reading_order(self) -> list[Block]:
        """Blocks in reading order: ordered blocks by `order`, then unordered ones as stored."""
        indexed = list(enumerate(self.blocks))
        indexed.sort(key=lambda ib: (ib[1].order is None, ib[1].order if ib[1].order is not None else 0, ib[0]))
        return [b for _, b in indexed]
