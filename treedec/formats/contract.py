"""The serialization every strategy shares (HPD-Parsing's public protocol).

Flat form (one stream, what a sequential parser emits):

    <BLOCK><|cat|>[x1,y1,x2,y2]<CHILD>content <BLOCK>...<eos>

Tree form: a layout stream `<BLOCK><|cat|>[x1,y1,x2,y2]<FORK> ... <eos>` plus one
branch per `<FORK>`, `<CHILD>content<eos>`, which starts at the fork's position.
Boxes are integers 0-1000 relative to the page size. Categories are single control
tokens spelled `<|category|>` (bare `<table>` would collide with table HTML).

`parse_flat` reads model output back into a `Page`, repairing what it must and
saying what it repaired.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from treedec.page import CATEGORIES, Block, Page

BLOCK, FORK, CHILD, EOS = "<BLOCK>", "<FORK>", "<CHILD>", "<eos>"
CONTROL = (BLOCK, FORK, CHILD, EOS)


def category_token(category: str) -> str:
    return f"<|{category}|>"


CATEGORY_TOKENS = tuple(category_token(c) for c in CATEGORIES)
_CAT_OF_TOKEN = {category_token(c): c for c in CATEGORIES}


def coord(v: float, size: int) -> int:
    """A box coordinate as serialized: 0-1000 relative to the page side `size`."""
    return min(1000, max(0, round(1000 * v / size)))


def box_to_text(bbox: tuple[float, float, float, float], width: int, height: int) -> str:
    x1, y1, x2, y2 = bbox
    return f"[{coord(x1, width)},{coord(y1, height)},{coord(x2, width)},{coord(y2, height)}]"


def box_from_ints(box: tuple[int, int, int, int], width: int, height: int) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = box
    return (x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000)


def block_layout(b: Block, width: int, height: int) -> str:
    return BLOCK + category_token(b.category) + box_to_text(b.bbox, width, height)


def page_to_flat(page: Page) -> str:
    return "".join(block_layout(b, page.width, page.height) + CHILD + b.content
                   for b in page.reading_order()) + EOS


@dataclass
class TreeText:
    """Tree form of one page: the layout stream and one branch per `<FORK>`, in order."""
    layout: str
    branches: list[str] = field(default_factory=list)


def page_to_tree(page: Page) -> TreeText:
    return flat_to_tree(page_to_flat(page))


_SPLIT = re.compile(r"(<BLOCK>|<CHILD>|<FORK>|<eos>)")


def flat_to_tree(flat: str) -> TreeText:
    """Every `<CHILD>content` becomes `<FORK>` in the layout and a branch `<CHILD>content<eos>`."""
    layout, branches = [], []
    parts = _SPLIT.split(flat)
    i = 0
    while i < len(parts):
        piece = parts[i]
        if piece == CHILD:
            content = parts[i + 1] if i + 1 < len(parts) else ""
            layout.append(FORK)
            branches.append(CHILD + content + EOS)
            i += 2
            continue
        layout.append(piece)
        i += 1
    return TreeText("".join(layout), branches)


def tree_to_flat(tree: TreeText) -> str:
    """Splice each branch (without its `<eos>`) in place of its `<FORK>`. Branches beyond
    the number of forks are dropped; forks without a branch get an empty `<CHILD>`."""
    out, k = [], 0
    for piece in _SPLIT.split(tree.layout):
        if piece == FORK:
            branch = tree.branches[k] if k < len(tree.branches) else CHILD
            k += 1
            if branch.endswith(EOS):
                branch = branch[: -len(EOS)]
            if not branch.startswith(CHILD):
                branch = CHILD + branch
            out.append(branch)
        else:
            out.append(piece)
    return "".join(out)


# ---------------------------------------------------------------- parsing model output

_BOX = re.compile(r"^\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")


@dataclass
class ParseResult:
    page: Page
    repairs: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.repairs


def _parse_box(head: str, where: str, repairs: list[str]) -> tuple[tuple[int, int, int, int], str]:
    m = _BOX.match(head)
    if not m:
        repairs.append(f"{where}: no box in {head[:20]!r}, used the whole page")
        return (0, 0, 1000, 1000), ""
    vals = [int(v) for v in m.groups()]
    clamped = [min(1000, max(0, v)) for v in vals]
    if clamped != vals:
        repairs.append(f"{where}: box {vals} out of range, clamped")
    x1, y1, x2, y2 = clamped
    if x2 < x1 or y2 < y1:
        repairs.append(f"{where}: box corners swapped")
        x1, x2, y1, y2 = min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)
    return (x1, y1, x2, y2), head[m.end():]


def block_chunks(text: str, repairs: list[str]) -> list[str]:
    """The text of each `<BLOCK>` of a flat stream (a `<FORK>` read as `<CHILD>`; text before
    the first block dropped; each repair noted)."""
    if FORK in text:
        repairs.append("<FORK> in flat output, read as <CHILD>")
        text = text.replace(FORK, CHILD)
    chunks = text.split(BLOCK)
    if chunks[0].strip():
        repairs.append(f"dropped {len(chunks[0])} characters before the first <BLOCK>")
    return chunks[1:]


def parse_flat(text: str, width: int = 1000, height: int = 1000, image_path: str = "") -> ParseResult:
    """Parse flat-form model output into a `Page`, tolerating malformed output.

    Repairs (each reported): junk before the first block or after `<eos>` dropped; a
    missing `<eos>`; an unknown or missing category (-> text_block); a missing,
    malformed, out-of-range or inverted box; a block without `<CHILD>` (the text
    after its box is its content); `<FORK>` in a flat stream (read as `<CHILD>`).
    """
    repairs: list[str] = []
    if EOS in text:
        text, tail = text.split(EOS, 1)
        if tail.strip():
            repairs.append(f"dropped {len(tail)} characters after <eos>")
    else:
        repairs.append("missing <eos>")
    blocks: list[Block] = []
    for n, chunk in enumerate(block_chunks(text, repairs), 1):
        where = f"block {n}"
        head, sep, content = chunk.partition(CHILD)
        if CHILD in content:
            repairs.append(f"{where}: repeated <CHILD> kept as text")
        category = "text_block"
        m = re.match(r"\s*<\|(\w+)\|>", head)
        if m and m.group(1) in CATEGORIES:
            category = m.group(1)
            head = head[m.end():]
        elif m:
            repairs.append(f"{where}: unknown category {m.group(1)!r}, used text_block")
            head = head[m.end():]
        else:
            repairs.append(f"{where}: no category, used text_block")
        box, rest = _parse_box(head, where, repairs)
        if not sep:
            repairs.append(f"{where}: no <CHILD>, text after the box read as content")
            content = rest
        elif rest.strip():
            repairs.append(f"{where}: dropped {len(rest)} characters between box and content")
        blocks.append(Block(category=category, bbox=box_from_ints(box, width, height), content=content, order=n))
    return ParseResult(Page(width=width, height=height, blocks=blocks, image_path=image_path), repairs)


def parse_tree(tree: TreeText, width: int = 1000, height: int = 1000, image_path: str = "") -> ParseResult:
    result = parse_flat(tree_to_flat(tree), width, height, image_path)
    forks = tree.layout.count(FORK)
    if len(tree.branches) != forks:
        result.repairs.append(f"{forks} forks but {len(tree.branches)} branches")
    return result
