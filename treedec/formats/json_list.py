"""Formats whose output is one JSON list of blocks (dots.ocr's layout JSON, PaddleOCR-VL's
`parsing_res_list`): reading it tolerantly (a cut or broken list gives its complete objects and
the last one as far as it goes, each repair noted)."""
from __future__ import annotations

import json
from typing import Callable

from treedec.formats.contract import ParseResult
from treedec.formats.grid import Categories, from_grid
from treedec.page import Block, Page


def read_json_blocks(text: str, page: Page, categories: Categories, keys: tuple[str, str, str],
                     content: Callable[[str, str], str] = lambda category, s: s) -> ParseResult:
    """`page` with the blocks of the JSON list in `text`; `keys`: the names of an object's
    category, box (pixels) and content; `content(category, text)`: a content as treedec keeps it."""
    repairs: list[str] = []
    cat_key, box_key, text_key = keys
    for n, item in enumerate(json_items(text, repairs), 1):
        where = f"block {n}"
        if not isinstance(item, dict):
            repairs.append(f"{where}: not a JSON object, dropped")
            continue
        category = categories.category(str(item.get(cat_key, categories.word("text_block"))), where, repairs)
        bbox = item.get(box_key)
        if isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox):
            box = from_grid([round(v) for v in bbox], page.width, page.height, None, where, repairs)
        else:
            repairs.append(f"{where}: no box, used the whole page")
            box = (0, 0, page.width, page.height)
        page.blocks.append(Block(category, box, content(category, str(item.get(text_key, ""))), order=len(page.blocks)))
    return ParseResult(page, repairs)


def json_items(text: str, repairs: list[str]) -> list:
    """The JSON list in `text`; a truncated or broken list gives its complete objects, and the
    last one's text up to the cut (each noted)."""
    start = text.find("[")
    if start < 0:
        repairs.append("no JSON list in the output")
        return []
    if text[:start].strip():
        repairs.append(f"dropped {start} characters before the JSON list")
    try:
        items, end = json.JSONDecoder().raw_decode(text, start)
        if text[end:].strip():
            repairs.append(f"dropped {len(text) - end} characters after the JSON list")
        return items if isinstance(items, list) else []
    except json.JSONDecodeError:
        pass
    decoder, items, pos = json.JSONDecoder(), [], start + 1
    while (obj := text.find("{", pos)) >= 0:
        try:
            item, pos = decoder.raw_decode(text, obj)
            items.append(item)
        except json.JSONDecodeError:
            item = _salvage(text[obj:])
            if item:
                items.append(item)
            repairs.append(f"broken JSON after {len(items) - bool(item)} complete blocks: "
                           f"{'the last block kept as far as it goes' if item else 'the rest dropped'}")
            return items
    repairs.append("unclosed JSON list")
    return items


def _salvage(fragment: str) -> dict | None:
    """A cut-off object's bbox, category and text as far as they go."""
    for tail in ('"}', "}", '"]}', "]}"):
        try:
            item, _ = json.JSONDecoder().raw_decode(fragment + tail)
            return item if isinstance(item, dict) else None
        except json.JSONDecodeError:
            continue
    return None
