"""What several formats share: boxes on an integer grid (0-1000, DocTags' 0-500, pixels) read
back with each repair said, and category words mapped to OmniDocBench categories."""
from __future__ import annotations

from treedec.page import CATEGORIES

Box = tuple[float, float, float, float]


def on_grid(bbox: Box, width: int, height: int, grid: int | None) -> tuple[int, int, int, int]:
    """`bbox` (pixels) as integers on a `grid`-unit scale of the page's sides (None: pixels),
    clamped to the page (some annotated boxes overhang it)."""
    x1, y1, x2, y2 = bbox
    sides = ((x1, width), (y1, height), (x2, width), (y2, height))
    if grid is None:
        return tuple(min(s, max(0, round(v))) for v, s in sides)
    return tuple(min(grid, max(0, round(grid * v / s))) for v, s in sides)


def from_grid(vals: list[int], width: int, height: int, grid: int | None, where: str, repairs: list[str]) -> Box:
    """Grid integers back to pixels; out-of-range values clamped, swapped corners sorted (each
    repair noted in `repairs`)."""
    top = (grid or width, grid or height) * 2
    clamped = [min(t, max(0, v)) for v, t in zip(vals, top)]
    if clamped != list(vals):
        repairs.append(f"{where}: box {list(vals)} out of range, clamped")
    x1, y1, x2, y2 = clamped
    if x2 < x1 or y2 < y1:
        repairs.append(f"{where}: box corners swapped")
    if grid is None:
        return (x1, y1, x2, y2)
    return (x1 * width / grid, y1 * height / grid, x2 * width / grid, y2 * height / grid)


class Categories:
    """OmniDocBench categories <-> a format's category words. `words` gives each category its
    word (a category absent is written as `text_block`'s); `read` says what a word is read as
    where several categories share it, and adds words the format has beyond those. Unknown words read as text_block, noted."""

    def __init__(self, words: dict[str, str], read: dict[str, str] | None = None):
        self.words = words
        self.back = {**{w: c for c, w in reversed(list(words.items()))}, **(read or {})}

    def word(self, category: str) -> str:
        return self.words.get(category, self.words["text_block"])

    def category(self, word: str, where: str, repairs: list[str]) -> str:
        if word in self.back:
            return self.back[word]
        repairs.append(f"{where}: unknown category {word!r}, read as text_block")
        return "text_block"

    def lost(self) -> tuple[str, ...]:
        """Categories that do not come back as themselves (absent, or sharing a word)."""
        return tuple(c for c in CATEGORIES if self.back.get(self.word(c)) != c)
