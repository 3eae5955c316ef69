"""Ground-truth pages -> the items the matcher compares, as OmniDocBench prepares them.

Blocks linked by `truncated` relations are merged into one (text joined in reading
order). Text-like blocks and display formulas form one pool; tables another. Both are
sorted by `order` (missing order counts as 0).
"""
from __future__ import annotations

from treedec.metrics.blocks import GtItem
from treedec.page import Block, Page

# Categories offered to the text/formula matcher, in the order OmniDocBench gathers them.
TEXT_POOL = ("text_block", "title", "code_txt", "code_txt_caption", "reference", "equation_caption",
             "figure_caption", "figure_footnote", "table_caption", "table_footnote", "code_algorithm",
             "code_algorithm_caption", "header", "footer", "page_footnote", "page_number", "equation_isolated")
# Matched first and then left out of every score.
IGNORED = ("figure_caption", "figure_footnote", "table_caption", "table_footnote", "code_algorithm",
           "code_algorithm_caption", "header", "footer", "page_footnote", "page_number", "equation_caption")
# Categories whose matches count for text edit distance and reading order.
SCORED_TEXT = tuple(c for c in TEXT_POOL if c not in IGNORED and c != "equation_isolated")


def _order_key(order: float | None) -> tuple[bool, float]:
    return (order is None, order or 0)


def truncation_groups(relations: list[dict]) -> list[list]:
    """Lists of anno_ids to merge. A relation that touches existing lists is appended to
    each of them, so a chain A-B, B-C gives [A, B, B, C] (and B's text twice), exactly
    as the official tool does."""
    groups: list[list] = []
    for rel in relations:
        if rel.get("relation_type") != "truncated":
            continue
        pair = [rel.get("source_anno_id"), rel.get("target_anno_id")]
        joined = False
        for group in groups:
            if pair[0] in group or pair[1] in group:
                group += pair
                joined = True
        if not joined:
            groups.append(pair)
    return groups


def _merged(blocks: list[Block]) -> GtItem:
    blocks = sorted(blocks, key=lambda b: _order_key(b.order))
    return GtItem(blocks[0].category, "".join(b.content for b in blocks), blocks[0].order)


def _items_by_category(page: Page) -> dict[str, list[GtItem]]:
    groups = truncation_groups(page.relations)
    merged_ids = {i for g in groups for i in g}
    by_id = {b.extra.get("anno_id"): b for b in page.blocks if b.extra.get("anno_id") in merged_ids}
    out: dict[str, list[GtItem]] = {}
    for b in page.blocks:
        if b.extra.get("anno_id") not in merged_ids:
            out.setdefault(b.category, []).append(GtItem(b.category, b.content, b.order, b.extra.get("latex") or ""))
    for group in groups:
        blocks = [by_id[i] for i in group if i in by_id]
        if blocks:
            item = _merged(blocks)
            out.setdefault(item.category, []).append(item)
    return out


def _sorted(items: list[GtItem]) -> list[GtItem]:
    return sorted(items, key=lambda it: it.order or 0)


def gt_pools(page: Page) -> tuple[list[GtItem], list[GtItem]]:
    """(text and formula items, table items) of a ground-truth page, each in order."""
    by_category = _items_by_category(page)
    text_pool = [it for c in TEXT_POOL for it in by_category.get(c, [])]
    return _sorted(text_pool), _sorted(by_category.get("table", []))
