"""`mineru`: MinerU2.5's two stages (opendatalab/MinerU, mineru-vl-utils, the MinerU2.5 report).

Followed: stage 1, the layout pass, prompt `\\nLayout Detection:`, one line per region
`<|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>type<|ref_end|>` with integers 0-1000 of the
page's sides, in reading order; stage 2 reads each region's crop with a per-type prompt
(`\\nText Recognition:`, `\\nTable Recognition:` (written as OTSL, `treedec.formats.otsl`),
`\\nFormula Recognition:` (LaTeX)); image regions are not read here (MinerU2.5 later added
`\\nImage Analysis:`, not followed). The types are mineru-vl-utils' block types.
The page's record (`render`, what `parse` reads): the layout lines, each followed by its crop's
read between `<|md_start|>` and `<|md_end|>`: MinerU's one-pass "Document Parsing" form.
Each layout line ends with its rotation token (`<|rotate_up|>`: every region upright), as
MinerU2.5 writes it and its client expects; a box is at least one unit wide and high on the grid
(`nonempty`). Rotation tokens are read and dropped. Uncertain: whether the equation read wraps
its LaTeX in `\\[ \\]` (here: bare)."""
from __future__ import annotations

import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import ParseResult
from treedec.formats.crop_reads import OtslCropReads
from treedec.formats.grid import Categories, from_grid, on_grid
from treedec.page import Block, Page

CATEGORIES = Categories({
    "title": "title", "text_block": "text", "figure": "image", "figure_caption": "image_caption",
    "figure_footnote": "image_footnote", "table": "table", "table_caption": "table_caption",
    "table_footnote": "table_footnote", "equation_isolated": "equation", "header": "header", "footer": "footer",
    "page_number": "page_number", "page_footnote": "page_footnote", "abandon": "aside_text", "code_txt": "code",
    "code_txt_caption": "code_caption", "reference": "ref_text", "code_algorithm": "algorithm"},
    read={"list": "text_block", "equation_block": "equation_isolated", "chart": "figure", "image_block": "figure",
          "phonetic": "text_block", "unknown": "text_block", "index": "text_block"})
BOX, REF, MD = ("<|box_start|>", "<|box_end|>"), ("<|ref_start|>", "<|ref_end|>"), ("<|md_start|>", "<|md_end|>")
ROTATE = "<|rotate_up|>"  # every region upright: MinerU2.5 writes its rotation after the type
_LINE = re.compile(r"<\|box_start\|>([^<]*)<\|box_end\|>(?:<\|ref_start\|>(\w*)<\|ref_end\|>)?(?:<\|rotate_\w+\|>)?"
                   r"(?:<\|md_start\|>(.*?)(?:<\|md_end\|>|(?=<\|box_start\|>)|$))?", re.S)


def nonempty(box: tuple[int, int, int, int], grid: int = 1000) -> tuple[int, int, int, int]:
    """A box at least one unit wide and high on the grid (a region thinner than that, or past the
    page's edge, would be empty there; MinerU's client drops such a box)."""
    x1, y1, x2, y2 = box
    if x2 <= x1:
        x1, x2 = (x1, x1 + 1) if x1 < grid else (grid - 1, grid)
    if y2 <= y1:
        y1, y2 = (y1, y1 + 1) if y1 < grid else (grid - 1, grid)
    return x1, y1, x2, y2


@FORMATS.register("mineru")
class MineruFormat(OtslCropReads, Format):
    name = "mineru"
    two_stage = True
    coords = "integers 0-1000 relative to the page's width and height, x1 y1 x2 y2"
    cannot_express = (f"categories MinerU2.5 lacks: {', '.join(CATEGORIES.lost())}",
                      "table cell markup beyond what OTSL holds (th, attributes)")
    prompts = {"layout": "\nLayout Detection:"}
    crop_prompts = {None: "\nText Recognition:", "table": "\nTable Recognition:",
                    "equation_isolated": "\nFormula Recognition:"}

    def layout_line(self, b: Block, width: int, height: int) -> str:
        box = " ".join(map(str, nonempty(on_grid(b.bbox, width, height, 1000))))
        return f"{BOX[0]}{box}{BOX[1]}{REF[0]}{CATEGORIES.word(b.category)}{REF[1]}{ROTATE}"

    def render_layout(self, page: Page) -> str:
        return "\n".join(self.layout_line(b, page.width, page.height) for b in page.reading_order())

    def content_text(self, block: Block) -> str:
        return self.crop_text(block)

    def render(self, page: Page) -> str:
        return "\n".join(self.layout_line(b, page.width, page.height) + MD[0] + self.content_text(b) + MD[1]
                         for b in page.reading_order())

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span(3) for m in _LINE.finditer(text) if m.group(3)]

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        repairs: list[str] = []
        blocks = []
        for m in _LINE.finditer(text):
            where = f"block {len(blocks) + 1}"
            category = CATEGORIES.category(m.group(2), where, repairs) if m.group(2) else "text_block"
            if not m.group(2):
                repairs.append(f"{where}: no type, read as text_block")
            nums = re.findall(r"-?\d+", m.group(1))
            if len(nums) == 4:
                box = from_grid([int(v) for v in nums], width, height, 1000, where, repairs)
            else:
                repairs.append(f"{where}: no box in {m.group(1)[:20]!r}, used the whole page")
                box = (0, 0, width, height)
            content = m.group(3) or ""
            if m.group(3) is not None and not m.group(0).endswith(MD[1]):
                repairs.append(f"{where}: read not closed")
            blocks.append(Block(category, box, self.read_crop(content, category),
                                order=len(blocks)))
        if not blocks and text.strip():
            repairs.append("no layout line in the output")
        return ParseResult(Page(width=width, height=height, blocks=blocks, image_path=image_path), repairs)
