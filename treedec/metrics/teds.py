"""TEDS and TEDS-S: tree-edit-distance similarity of two HTML tables (APTED).

The tree keeps every element down to the cells; a cell is a leaf labelled with its tag,
colspan, rowspan and (for TEDS) its content as tokens: characters, and `<tag>`/`</tag>`
for markup inside the cell. Renaming costs 1 when tag or spans differ, else the
normalized edit distance of the contents; inserting or deleting costs 1.
TEDS = 1 - distance / (elements in the larger table).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from apted import APTED, Config

from treedec.metrics.edit_distance import normalized_edit_distance


@dataclass
class TableNode:
    tag: str
    colspan: int | None = None
    rowspan: int | None = None
    content: list[str] = field(default_factory=list)
    children: list["TableNode"] = field(default_factory=list)


class _TableConfig(Config):
    def rename(self, a: TableNode, b: TableNode) -> float:
        if (a.tag, a.colspan, a.rowspan) != (b.tag, b.colspan, b.rowspan):
            return 1.0
        if a.tag == "td" and (a.content or b.content):
            return normalized_edit_distance(a.content, b.content)
        return 0.0

    def children(self, node: TableNode) -> list[TableNode]:
        return node.children


def _is_element(node) -> bool:
    return isinstance(node.tag, str)


def _cell_tokens(el) -> list[str]:
    """Tokens inside an element: its text, each child as `<tag>` ... `</tag>` + tail."""
    tokens = list(el.text or "")
    for child in el:
        if not _is_element(child):
            continue
        tokens.append(f"<{child.tag}>")
        tokens += _cell_tokens(child)
        if child.tag != "unk":
            tokens.append(f"</{child.tag}>")
        if child.tag != "td":
            tokens += list(child.tail or "")
    return tokens


def _tree(el, with_content: bool) -> TableNode:
    if el.tag == "td":
        return TableNode("td", int(el.get("colspan", "1")), int(el.get("rowspan", "1")),
                         _cell_tokens(el) if with_content else [])
    return TableNode(el.tag, children=[_tree(c, with_content) for c in el if _is_element(c)])


def _parse_table(markup: str):
    from lxml import html

    root = html.fromstring(markup, parser=html.HTMLParser(remove_comments=True, encoding="utf-8"))
    tables = root.xpath("body/table")
    return tables[0] if tables else None


def teds(pred: str, gt: str, structure_only: bool = False) -> float:
    """TEDS in [0, 1] of two HTML documents holding `<body><table>` (as produced by
    `normalize_table_html`); 0.0 when either is empty, has no table or cannot be read."""
    if not pred or not gt:
        return 0.0
    try:
        pred_table, gt_table = _parse_table(pred), _parse_table(gt)
        if pred_table is None or gt_table is None:
            return 0.0
        n_nodes = max(len(pred_table.xpath(".//*")), len(gt_table.xpath(".//*")))
        distance = APTED(_tree(pred_table, not structure_only), _tree(gt_table, not structure_only),
                         _TableConfig()).compute_edit_distance()
        return 1.0 - float(distance) / n_nodes
    except Exception:  # unreadable markup (bad spans, parser errors) scores as no table
        return 0.0
