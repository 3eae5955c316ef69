"""`doctags`: Docling's DocTags, as SmolDocling and granite-docling write a page
(docling-project; the SmolDocling paper's appendix; docling-core's DocTags serializer).

Followed: the page wrapped in `<doctag>...</doctag>`; each element `<tag><loc_x1><loc_y1>
<loc_x2><loc_y2>content</tag>` with the box on a 500-unit grid of the page's sides (x1, y1,
x2, y2); element tags title, section_header_level_1, text, caption, footnote, page_header,
page_footer, formula (LaTeX), code, list_item, picture (no content), otsl (tables as OTSL,
`treedec.formats.otsl`); the prompt `Convert this page to docling.`
Uncertain: whether the grid's top value is 500 or 499 (written here 0-500); text is written
unescaped (DocTags has no escaping rule we could find); pictures' classification tags and
code's language tags are not written (read and dropped)."""
from __future__ import annotations

import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import ParseResult
from treedec.formats.grid import Categories, from_grid, on_grid
from treedec.formats.otsl import html_to_otsl, otsl_to_html
from treedec.page import Block, Page

GRID = 500
CATEGORIES = Categories({
    "title": "section_header_level_1", "text_block": "text", "figure": "picture", "figure_caption": "caption",
    "table_caption": "caption", "equation_caption": "caption", "code_txt_caption": "caption",
    "code_algorithm_caption": "caption", "figure_footnote": "footnote", "table_footnote": "footnote",
    "page_footnote": "footnote", "table": "otsl", "equation_isolated": "formula", "header": "page_header",
    "footer": "page_footer", "page_number": "page_footer", "code_txt": "code", "code_algorithm": "code",
    "reference": "list_item"},
    read={"title": "title", **{f"section_header_level_{k}": "title" for k in range(2, 7)}, "caption": "figure_caption",
          "footnote": "page_footnote", "page_footer": "footer", "list_item": "text_block", "code": "code_txt",
          "chart": "figure", "paragraph": "text_block", "reference": "reference"})
_ELEMENT = re.compile(r"<([a-z_0-9]+)>((?:<loc_\d+>){0,4})(.*?)(?:</\1>|(?=<[a-z_0-9]+><loc_)|$)", re.S)
_LOC = re.compile(r"<loc_(\d+)>")
_SKIPPED_TAGS = re.compile(r"<_[^>]*_>|<image_class>.*?</image_class>|<[a-z_]+_class>")


@FORMATS.register("doctags")
class DocTagsFormat(Format):
    name = "doctags"
    coords = "a 500-unit grid of the page's sides, <loc_x1><loc_y1><loc_x2><loc_y2>"
    cannot_express = (f"categories DocTags lacks: {', '.join(CATEGORIES.lost())}",
                      "table cell markup beyond what OTSL holds (th, attributes)")
    prompts = {"page": "Convert this page to docling."}

    def content_text(self, block: Block) -> str:
        if block.category == "figure":
            return ""
        return html_to_otsl(block.content) if block.category == "table" else block.content

    def element(self, b: Block, width: int, height: int) -> str:
        tag = CATEGORIES.word(b.category)
        locs = "".join(f"<loc_{v}>" for v in on_grid(b.bbox, width, height, GRID))
        return f"<{tag}>{locs}{self.content_text(b)}</{tag}>"

    def render(self, page: Page) -> str:
        return "<doctag>" + "".join(self.element(b, page.width, page.height) for b in page.reading_order()) + "</doctag>"

    def _elements(self, text: str):
        body = text.replace("<doctag>", "", 1)
        offset = len(text) - len(body)
        for m in _ELEMENT.finditer(body):
            if m.group(1) == "doctag":
                continue
            yield m, offset

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [(m.start(3) + o, m.end(3) + o) for m, o in self._elements(text) if m.group(3)]

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        repairs: list[str] = []
        if "<doctag>" not in text:
            repairs.append("no <doctag>")
        if "</doctag>" not in text:
            repairs.append("missing </doctag>: output cut")
        blocks = []
        for m, _ in self._elements(text.split("</doctag>", 1)[0]):
            where = f"block {len(blocks) + 1}"
            category = CATEGORIES.category(m.group(1), where, repairs)
            locs = [int(v) for v in _LOC.findall(m.group(2))]
            if len(locs) == 4:
                box = from_grid(locs, width, height, GRID, where, repairs)
            else:
                repairs.append(f"{where}: {len(locs)} of 4 locations, used the whole page")
                box = (0, 0, width, height)
            content = _SKIPPED_TAGS.sub("", m.group(3))
            if not m.group(0).endswith(f"</{m.group(1)}>"):
                repairs.append(f"{where}: <{m.group(1)}> not closed")
            if category == "table":
                content = otsl_to_html(content)
            blocks.append(Block(category, box, content, order=len(blocks)))
        return ParseResult(Page(width=width, height=height, blocks=blocks, image_path=image_path), repairs)
