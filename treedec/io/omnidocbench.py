"""OmniDocBench JSON <-> `Page`.

Schema: a list of pages `{layout_dets, page_info, extra}`; each block has
`category_type`, `poly` (8 floats, TL TR BR BL), `order`, `ignore`, and `text` /
`latex` / `html`. Fields treedec does not model are kept in `Block.extra` and
written back unchanged.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from treedec.page import Block, Page

_BLOCK_KEYS = {"category_type", "poly", "order", "ignore"}
_ABSENT = "_content_absent"


def _poly_to_bbox(poly: list[float]) -> tuple[float, float, float, float]:
    if len(poly) < 8:
        raise ValueError(f"poly needs 8 numbers, got {len(poly)}")
    xs, ys = poly[0::2], poly[1::2]
    return (min(xs), min(ys), max(xs), max(ys))


def _bbox_to_poly(b: tuple[float, float, float, float]) -> list[float]:
    x1, y1, x2, y2 = b
    return [x1, y1, x2, y1, x2, y2, x1, y2]


def block_from_omnidocbench(d: dict[str, Any]) -> Block:
    category = d["category_type"]
    field = {"table": "html", "equation_isolated": "latex"}.get(category, "text")
    extra = {k: v for k, v in d.items() if k not in _BLOCK_KEYS and k != field}
    extra["poly"] = list(d["poly"])
    if field not in d:
        extra[_ABSENT] = True  # written back without a content field, as read
    return Block(category=category, bbox=_poly_to_bbox(d["poly"]), content=d.get(field) or "",
                 order=d.get("order"), ignore=bool(d.get("ignore", False)), extra=extra)


def block_to_omnidocbench(b: Block) -> dict[str, Any]:
    extra = dict(b.extra)
    poly = extra.pop("poly", None)
    if poly is None or _poly_to_bbox(poly) != b.bbox:
        poly = _bbox_to_poly(b.bbox)
    d: dict[str, Any] = {"category_type": b.category, "poly": poly, "ignore": b.ignore, "order": b.order}
    absent = extra.pop(_ABSENT, False)
    d.update(extra)
    if not (absent and not b.content):
        d[b.field] = b.content
    return d


def page_from_omnidocbench(d: dict[str, Any]) -> Page:
    info = dict(d.get("page_info") or {})
    try:
        width, height = int(info.pop("width")), int(info.pop("height"))
    except KeyError as e:
        raise ValueError(f"page_info lacks {e.args[0]!r}") from None
    return Page(width=width, height=height, image_path=info.pop("image_path", ""), info=info,
                blocks=[block_from_omnidocbench(b) for b in d.get("layout_dets", [])],
                relations=list((d.get("extra") or {}).get("relation", [])))


def page_to_omnidocbench(p: Page) -> dict[str, Any]:
    info = dict(p.info)
    info.update(width=p.width, height=p.height, image_path=p.image_path)
    return {"layout_dets": [block_to_omnidocbench(b) for b in p.blocks], "page_info": info,
            "extra": {"relation": list(p.relations)}}


def load_omnidocbench(path: str | Path) -> list[Page]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no OmniDocBench JSON at {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = [data]
    return [page_from_omnidocbench(d) for d in data]


def save_omnidocbench(pages: list[Page] | Page, path: str | Path) -> None:
    data = page_to_omnidocbench(pages) if isinstance(pages, Page) else [page_to_omnidocbench(p) for p in pages]
    Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
