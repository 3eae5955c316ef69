"""What the two-stage formats' crop reads write (MinerU2.5, PaddleOCR-VL): a region's text as
it is, a table as OTSL (`treedec.formats.otsl`), nothing for a region without text (a figure,
a mask), which is not read; `read_crop` turns a read back into a block's content."""
from __future__ import annotations

from treedec.formats.otsl import html_to_otsl, otsl_to_html
from treedec.page import Block

NOT_READ = frozenset({"figure", "text_mask", "table_mask"})  # the same set as `treedec.strategies.crop_read.UNREAD`


class OtslCropReads:
    """`Format.crop_text` and `Format.read_crop` of a format whose crop reads write tables as OTSL."""

    def crop_text(self, block: Block) -> str:
        if block.category in NOT_READ:
            return ""
        return html_to_otsl(block.content) if block.category == "table" else block.content

    def read_crop(self, text: str, category: str) -> str:
        return otsl_to_html(text) if category == "table" else text
