"""`paddleocr`: PaddleOCR-VL (PaddlePaddle/PaddleOCR-VL; PaddleOCR's PaddleOCR-VL pipeline docs).

Followed: the layout comes from a separate detector (PP-DocLayoutV2; here the pipeline's layout,
or the ground truth's regions under forcing: a perfect detector), so the format has no layout
prompt (`detector_layout`); each region's crop is read with its task's prompt: `OCR:`,
`Table Recognition:` (written as OTSL cells, `<fcel>`...: `treedec.formats.otsl`),
`Formula Recognition:` (LaTeX), `Chart Recognition:` (not used: treedec has no chart category);
the region labels are PP-DocLayoutV2's. The page's record (`render`, what `parse` reads) is the
pipeline's `parsing_res_list`: a JSON list of `{"block_label", "block_bbox" (pixels),
"block_content"}` in reading order, the content being the crop's read as the model wrote it.
Uncertain: PaddleOCR-VL's exact OTSL dialect for tables (read with the tolerant OTSL reader);
the label of each OmniDocBench category (PP-DocLayoutV2's 25 labels do not all map one to one)."""
from __future__ import annotations

import json
import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import ParseResult
from treedec.formats.crop_reads import OtslCropReads
from treedec.formats.grid import Categories, on_grid
from treedec.formats.json_list import read_json_blocks
from treedec.page import Block, Page

CATEGORIES = Categories({
    "title": "paragraph_title", "text_block": "text", "figure": "image", "figure_caption": "figure_title",
    "table_caption": "figure_title", "figure_footnote": "vision_footnote", "table_footnote": "vision_footnote",
    "table": "table", "equation_isolated": "display_formula", "equation_caption": "formula_number",
    "header": "header", "footer": "footer", "page_number": "number", "page_footnote": "footnote",
    "abandon": "aside_text", "reference": "reference_content", "code_algorithm": "algorithm"},
    read={"doc_title": "title", "chart": "figure", "header_image": "figure", "footer_image": "figure", "seal": "figure",
          "abstract": "text_block", "content": "text_block", "vertical_text": "text_block", "reference": "reference",
          "inline_formula": "text_block"})
_CONTENT = re.compile(r'"block_content"\s*:\s*"((?:[^"\\]|\\.)*)', re.S)


@FORMATS.register("paddleocr")
class PaddleOcrFormat(OtslCropReads, Format):
    name = "paddleocr"
    two_stage = True
    detector_layout = True
    coords = "pixels of the page, [x1, y1, x2, y2] (the detector's boxes)"
    cannot_express = (f"categories PP-DocLayoutV2 lacks: {', '.join(CATEGORIES.lost())}",
                      "table cell markup beyond what OTSL holds (th, attributes)")
    prompts = {}
    crop_prompts = {None: "OCR:", "table": "Table Recognition:", "equation_isolated": "Formula Recognition:"}

    def content_text(self, block: Block) -> str:
        return json.dumps(self.crop_text(block), ensure_ascii=False)[1:-1] if self.crop_text(block) else ""

    def render(self, page: Page) -> str:
        return json.dumps([{"block_label": CATEGORIES.word(b.category), "block_bbox": list(on_grid(b.bbox, page.width, page.height, None)),
                            "block_content": self.crop_text(b)} for b in page.reading_order()], ensure_ascii=False)

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span(1) for m in _CONTENT.finditer(text)]

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        return read_json_blocks(text, Page(width=width, height=height, image_path=image_path), CATEGORIES,
                                ("block_label", "block_bbox", "block_content"),
                                lambda category, s: self.read_crop(s, category))
