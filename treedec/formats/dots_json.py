"""`dots_json`: dots.ocr's layout JSON (rednote-hilab/dots.ocr, `dots_ocr/utils/prompts.py`).

Followed: the page (`prompt_layout_all_en`): one JSON list, in reading order, of `{"bbox": [x1,
y1, x2, y2], "category": ..., "text": ...}`; the 11 categories Caption, Footnote, Formula,
List-item, Page-footer, Page-header, Picture, Section-header, Table, Text, Title; a Picture has
no `text`; tables as HTML, formulas as LaTeX, other text as Markdown; the prompt's wording.
Content is JSON-escaped (`content_text`), which is what drafts are matched against.
Its layout pass (`crops`' first stage), the prompt dots.ocr names "layout detection"
(`prompt_layout_only_en`, the repository's `--prompt prompt_layout_only_en`): the same JSON list
without `text` (`render_layout`; read back by the same tolerant reader, `read_layout`).
A region's text (`crops`' second stage, HSD's stage 1): its crop asked `prompt_ocr` ("Extract the
text content from this image."), whose output the repository keeps as it is (plain text, no
JSON): the block's content unescaped (`crop_text`), for every category.
Uncertain: dots.ocr writes boxes in pixels of the image it was given after its own resizing
(`smart_resize`); here pixels of the page as given; the exact spacing of its JSON (here Python's
`json.dumps` defaults, non-ASCII kept). `prompt_ocr` is shown on whole pages ("except the
Page-header and Page-footer"), not on region crops; whether it writes a table crop as HTML and a
formula crop as LaTeX (as the page prompt asks) is assumed, not documented; the repository's
table and formula prompts are commented out, so none is used; its `prompt_grounding_ocr` (a box
on the whole page) is not followed, crops being cut here."""
from __future__ import annotations

import json
import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import ParseResult
from treedec.formats.grid import Categories, on_grid
from treedec.formats.json_list import read_json_blocks
from treedec.page import Block, Page

CATEGORIES = Categories({
    "title": "Title", "text_block": "Text", "figure": "Picture", "figure_caption": "Caption",
    "table_caption": "Caption", "equation_caption": "Caption", "code_txt_caption": "Caption",
    "code_algorithm_caption": "Caption", "figure_footnote": "Footnote", "table_footnote": "Footnote",
    "page_footnote": "Footnote", "table": "Table", "equation_isolated": "Formula", "header": "Page-header",
    "footer": "Page-footer", "page_number": "Page-footer", "reference": "List-item"},
    read={"Section-header": "title", "Caption": "figure_caption", "Footnote": "page_footnote",
          "Page-footer": "footer", "List-item": "text_block"})
PROMPT = """Please output the layout information from the PDF image, including each layout element's bbox, its category, and the corresponding text content within the bbox.

1. Bbox format: [x1, y1, x2, y2]

2. Layout Categories: The possible categories are ['Caption', 'Footnote', 'Formula', 'List-item', 'Page-footer', 'Page-header', 'Picture', 'Section-header', 'Table', 'Text', 'Title'].

3. Text Extraction & Formatting Rules:
    - Picture: For the 'Picture' category, the text field should be omitted.
    - Formula: Format its text as LaTeX.
    - Table: Format its text as HTML.
    - All Others (Text, Title, etc.): Format their text as Markdown.

4. Constraints:
    - The output text must be the original text from the image, with no translation.
    - All layout elements must be sorted according to human reading order.

5. Final Output: The entire output must be a single JSON object.
"""
LAYOUT_PROMPT = ("Please output the layout information from this PDF image, including each layout's bbox and its "
                 "category. The bbox should be in the format [x1, y1, x2, y2]. The layout categories for the PDF "
                 "document include ['Caption', 'Footnote', 'Formula', 'List-item', 'Page-footer', 'Page-header', "
                 "'Picture', 'Section-header', 'Table', 'Text', 'Title']. Do not output the corresponding text. "
                 "The layout result should be in JSON format.")
OCR_PROMPT = "Extract the text content from this image."
_TEXT = re.compile(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)', re.S)


@FORMATS.register("dots_json")
class DotsJsonFormat(Format):
    name = "dots_json"
    coords = "pixels of the image as given, [x1, y1, x2, y2] (dots.ocr: of its resized image)"
    cannot_express = (f"categories dots.ocr lacks: {', '.join(CATEGORIES.lost())}",)
    prompts = {"page": PROMPT, "layout": LAYOUT_PROMPT}
    crop_prompts = {None: OCR_PROMPT}

    def content_text(self, block: Block) -> str:
        if block.category == "figure":
            return ""
        return json.dumps(block.content, ensure_ascii=False)[1:-1]

    def _item(self, b: Block, width: int, height: int, text: bool = True) -> dict:
        item = {"bbox": list(on_grid(b.bbox, width, height, None)), "category": CATEGORIES.word(b.category)}
        if text and b.category != "figure":
            item["text"] = b.content
        return item

    def render(self, page: Page) -> str:
        return json.dumps([self._item(b, page.width, page.height) for b in page.reading_order()], ensure_ascii=False)

    def render_layout(self, page: Page) -> str:
        """The layout pass's output: the page's JSON list without any `text`."""
        return json.dumps([self._item(b, page.width, page.height, text=False) for b in page.reading_order()],
                          ensure_ascii=False)

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span(1) for m in _TEXT.finditer(text)]

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        return read_json_blocks(text, Page(width=width, height=height, image_path=image_path), CATEGORIES,
                                ("category", "bbox", "text"))
