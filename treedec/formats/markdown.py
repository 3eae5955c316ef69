"""`markdown`: a page as end-to-end parsers write it (HunyuanOCR, olmOCR, Nanonets-OCR,
Qwen3-VL, the OmniDocBench predictions in Markdown): blocks in reading order, one paragraph each,
separated by a blank line; titles as `# heading`, display formulas as `$$\\nLaTeX\\n$$`, tables as
HTML; no boxes, no figures. Followed: OmniDocBench's reading of Markdown (`treedec.metrics.
markdown_blocks`), which `evaluate format=markdown` scores with. Uncertain: each model's own
prompt (the one here is generic) and habits (olmOCR writes front matter, some write pipe tables:
read as text here, scored as OmniDocBench reads them)."""
from __future__ import annotations

import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import ParseResult
from treedec.page import Block, Page

SKIPPED = frozenset({"figure", "text_mask", "table_mask"})
_PARAGRAPH = re.compile(r"\s*(\$\$.*?\$\$|<table\b.*?</table>|(?:(?!\n\s*\n).)+)", re.S)


def paragraph(b: Block) -> tuple[str, str, str]:
    """(before, content, after): how a block is written as one Markdown paragraph; content ""
    for a block Markdown leaves out (figures, masks, empty blocks)."""
    text = b.content.strip()
    if b.category in SKIPPED or not text:
        return "", "", ""
    if b.category == "title":
        return "# ", " ".join(text.split()), ""
    if b.category == "equation_isolated":
        return "$$\n", text, "\n$$"
    return "", re.sub(r"\n\s*\n", "\n", text), ""  # no blank line inside a paragraph


@FORMATS.register("markdown")
class MarkdownFormat(Format):
    name = "markdown"
    boxes = False
    scored_as_markdown = True
    coords = ""
    cannot_express = ("boxes", "figures", "categories beyond title, table, display formula and text")
    prompts = {"page": "Convert the document in this image to Markdown: tables as HTML, formulas as LaTeX."}

    def content_text(self, block: Block) -> str:
        return paragraph(block)[1]

    def render(self, page: Page) -> str:
        return "\n\n".join("".join(p) for p in map(paragraph, page.reading_order()) if p[1]) + "\n"

    def _paragraphs(self, text: str):
        """(start, end, category) of each paragraph's content."""
        for m in _PARAGRAPH.finditer(text):
            s, e = m.span(1)
            piece = m.group(1)
            if not piece.strip():
                continue
            if piece.startswith("$$"):
                inner = piece[2:-2]
                s += 2 + (len(inner) - len(inner.lstrip("\n")))
                e -= 2 + (len(inner) - len(inner.rstrip("\n")))
                yield s, max(s, e), "equation_isolated"
            elif piece.startswith("<table"):
                yield s, e, "table"
            elif (h := re.match(r"\s*#{1,6}\s+", piece)):
                yield s + h.end(), e, "title"
            else:
                lead = len(piece) - len(piece.lstrip())
                yield s + lead, e - (len(piece) - len(piece.rstrip())), "text_block"

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [(s, e) for s, e, _ in self._paragraphs(text)]

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        repairs = []
        if text.count("$$") % 2:
            repairs.append("odd number of $$ delimiters: the last formula is read as text")
        if len(re.findall(r"<table\b", text)) != text.count("</table>"):
            repairs.append("unclosed <table>: read as text")
        blocks = [Block(cat, (0, 0, width, height), text[s:e], order=n)
                  for n, (s, e, cat) in enumerate(self._paragraphs(text))]
        return ParseResult(Page(width=width, height=height, blocks=blocks, image_path=image_path), repairs)
