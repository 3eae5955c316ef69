"""`treedec`: treedec's own fork protocol (`treedec.formats.contract`, HPD-Parsing's protocol adapted).

Flat: `<BLOCK><|cat|>[x1,y1,x2,y2]<CHILD>content ... <eos>`; tree: a layout stream with
`<FORK>` in place of each `<CHILD>content`, one branch `<CHILD>content<eos>` per fork. Categories
are control tokens (`<|table|>`: all OmniDocBench categories), boxes integers 0-1000 relative to
the page's sides, content unescaped (a block's content may not hold the control tokens). Prompts
are treedec's mode tokens (`<|flat|>`, `<|tree|>`, `<|crop|>`): a treedec checkpoint's prompt is
its mode token after the image."""
from __future__ import annotations

import re

from treedec.formats.base import FORMATS, Format
from treedec.formats.contract import BLOCK, CHILD, EOS, ParseResult, TreeText, page_to_flat, page_to_tree, parse_flat
from treedec.page import Page

_CONTENT = re.compile(re.escape(CHILD) + r"(.*?)(?=" + re.escape(BLOCK) + "|" + re.escape(EOS) + r"|$)", re.S)


@FORMATS.register("treedec")
class TreedecFormat(Format):
    name = "treedec"
    forks = True
    coords = "integers 0-1000 relative to the page's width and height, [x1,y1,x2,y2]"
    eos_text = EOS
    cannot_express = ("a block's content holding <BLOCK>, <CHILD>, <FORK> or <eos>",)
    prompts = {"page": "<|flat|>", "tree": "<|tree|>", "layout": "<|tree|>"}
    crop_prompts = {None: "<|crop|>"}

    def render(self, page: Page) -> str:
        return page_to_flat(page)

    def render_tree(self, page: Page) -> TreeText:
        return page_to_tree(page)

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        return parse_flat(text, width, height, image_path)

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span(1) for m in _CONTENT.finditer(text)]
