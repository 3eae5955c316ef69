"""`hpd`: HPD-Parsing's own output (PaddleOCR's HPD-Parsing page, PaddlePaddle/HPD-Parsing).

Followed: the prompt `document parsing with fork.`; the flat output
`<BLOCK>type [x1,y1,x2,y2]<CHILD>content<BLOCK>...` with the category as a word, a space, the
box in brackets with commas; a block without text (an image) has no `<CHILD>`; the documented
reader splits blocks with `<BLOCK>(\\w+)\\s*\\[([^\\]]*)\\](?:<CHILD>)?(.*?)(?=<BLOCK>|\\Z)`. Tree
form (DESIGN.md's protocol): the layout stream writes `<FORK>` where the flat form has
`<CHILD>content`, and each fork's branch is `<CHILD>content`; the end of each stream is the
tokenizer's end token (nothing written as text).
Uncertain: the box scale (read here as integers 0-1000 of the page's sides, as the HPD paper's
protocol describes; the docs' example does not say) and the full list of category words (the docs
name text, title, image, image_caption, header, page_number; the others below follow the same
naming, MinerU-style, and are a guess)."""
from __future__ import annotations

import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import BLOCK, CHILD, EOS, ParseResult, TreeText, block_chunks, flat_to_tree
from treedec.formats.grid import Categories, from_grid, on_grid
from treedec.page import Block, Page

CATEGORIES = Categories({
    "title": "title", "text_block": "text", "figure": "image", "figure_caption": "image_caption",
    "figure_footnote": "image_footnote", "table": "table", "table_caption": "table_caption",
    "table_footnote": "table_footnote", "equation_isolated": "equation", "equation_caption": "equation_number",
    "header": "header", "footer": "footer", "page_number": "page_number", "page_footnote": "page_footnote",
    "abandon": "aside_text", "code_txt": "code", "code_txt_caption": "code_caption", "reference": "reference",
    "code_algorithm": "algorithm", "code_algorithm_caption": "algorithm_caption"},
    read={"doc_title": "title", "paragraph_title": "title", "formula": "equation_isolated",
          "display_formula": "equation_isolated", "footnote": "page_footnote", "chart": "figure"})
_HEAD = re.compile(r"\s*(\w+)?\s*(?:\[([^\]\[<]*)\])?")


@FORMATS.register("hpd")
class HpdFormat(Format):
    name = "hpd"
    forks = True
    coords = "integers 0-1000 relative to the page's width and height, [x1,y1,x2,y2] (scale uncertain)"
    cannot_express = (f"categories HPD-Parsing lacks: {', '.join(CATEGORIES.lost())}",
                      "a block's content holding <BLOCK>, <CHILD> or <FORK>")
    prompts = {"page": "document parsing.", "tree": "document parsing with fork."}

    def layout(self, b: Block, width: int, height: int) -> str:
        return f"{BLOCK}{CATEGORIES.word(b.category)} [{','.join(map(str, on_grid(b.bbox, width, height, 1000)))}]"

    def render(self, page: Page) -> str:
        return "".join(self.layout(b, page.width, page.height) + (CHILD + b.content if b.content else "")
                       for b in page.reading_order())

    def render_tree(self, page: Page) -> TreeText:
        tree = flat_to_tree(self.render(page))  # its branches end with treedec's <eos>, which HPD does not write
        return TreeText(tree.layout, [b.removesuffix(EOS) for b in tree.branches])

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        spans, pos = [], 0
        while (start := text.find(CHILD, pos)) >= 0:
            start += len(CHILD)
            nxt = text.find(BLOCK, start)
            end = len(text) if nxt < 0 else nxt
            spans.append((start, end))
            pos = end
        return spans

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        repairs: list[str] = []
        blocks = [self._block(chunk, n, width, height, repairs)
                  for n, chunk in enumerate(block_chunks(text, repairs), 1)]
        return ParseResult(Page(width=width, height=height, blocks=blocks, image_path=image_path), repairs)

    def _block(self, chunk: str, n: int, width: int, height: int, repairs: list[str]) -> Block:
        where = f"block {n}"
        head, sep, content = chunk.partition(CHILD)
        m = _HEAD.match(head)
        category = CATEGORIES.category(m.group(1), where, repairs) if m.group(1) else "text_block"
        if not m.group(1):
            repairs.append(f"{where}: no category, read as text_block")
        nums = re.findall(r"-?\d+", m.group(2) or "")
        if len(nums) == 4:
            box = from_grid([int(v) for v in nums], width, height, 1000, where, repairs)
        else:
            repairs.append(f"{where}: no box in {head[:20]!r}, used the whole page")
            box = (0, 0, width, height)
        rest = head[m.end():]
        if rest.strip():
            repairs.append(f"{where}: {len(rest)} characters after the box read as content")
            content = rest + content
        if CHILD in content:
            repairs.append(f"{where}: repeated <CHILD> kept as text")
        return Block(category=category, bbox=box, content=content, order=n)
