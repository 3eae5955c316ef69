import pytest

from treedec.page import Block, Page
from treedec.formats.contract import (CHILD, EOS, FORK, TreeText, box_to_text, flat_to_tree, page_to_flat, page_to_tree,
                               parse_flat, parse_tree, tree_to_flat)


def _same_page(a: Page, b: Page) -> None:
    ra, rb = a.reading_order(), b.reading_order()
    assert [x.category for x in ra] == [y.category for y in rb]
    assert [x.content for x in ra] == [y.content for y in rb]
    assert [box_to_text(x.bbox, a.width, a.height) for x in ra] == [box_to_text(y.bbox, b.width, b.height) for y in rb]


def _round_trips(page: Page) -> None:
    flat = page_to_flat(page)
    tree = flat_to_tree(flat)
    assert tree_to_flat(tree) == flat
    assert len(tree.branches) == len(page.blocks) == tree.layout.count(FORK)
    assert all(b.startswith(CHILD) and b.endswith(EOS) for b in tree.branches)
    assert CHILD not in tree.layout
    parsed = parse_flat(flat, page.width, page.height)
    assert parsed.clean, parsed.repairs
    _same_page(page, parsed.page)
    assert page_to_flat(parsed.page) == flat  # idempotent once boxes are quantized
    from_tree = parse_tree(tree, page.width, page.height)
    assert from_tree.clean and page_to_flat(from_tree.page) == flat


def test_round_trips_synthetic(synth_pages):
    for page in synth_pages:
        _round_trips(page)


def test_round_trips_real(demo_pages):
    for page in demo_pages:
        _round_trips(page)


def test_forms_match_protocol():
    page = Page(200, 100, [Block("title", (0, 0, 100, 10), "Hi", order=1),
                           Block("table", (20, 50, 200, 100), "<table></table>", order=2)])
    assert page_to_flat(page) == "<BLOCK><|title|>[0,0,500,100]<CHILD>Hi<BLOCK><|table|>[100,500,1000,1000]<CHILD><table></table><eos>"
    tree = page_to_tree(page)
    assert tree.layout == "<BLOCK><|title|>[0,0,500,100]<FORK><BLOCK><|table|>[100,500,1000,1000]<FORK><eos>"
    assert tree.branches == ["<CHILD>Hi<eos>", "<CHILD><table></table><eos>"]


@pytest.mark.parametrize("text, expect", [
    ("<BLOCK><|title|>[1,2,3,4]<CHILD>Hi", ["missing <eos>"]),
    ("junk<BLOCK><|title|>[1,2,3,4]<CHILD>Hi<eos>", ["before the first"]),
    ("<BLOCK><|title|>[1,2,3,4]<CHILD>Hi<eos>tail", ["after <eos>"]),
    ("<BLOCK><|nonsense|>[1,2,3,4]<CHILD>Hi<eos>", ["unknown category"]),
    ("<BLOCK>[1,2,3,4]<CHILD>Hi<eos>", ["no category"]),
    ("<BLOCK><|title|>[1,2,3<CHILD>Hi<eos>", ["no box"]),
    ("<BLOCK><|title|>[1,2,3,4000]<CHILD>Hi<eos>", ["out of range"]),
    ("<BLOCK><|title|>[9,9,3,4]<CHILD>Hi<eos>", ["swapped"]),
    ("<BLOCK><|title|>[1,2,3,4]Hi<eos>", ["no <CHILD>"]),
    ("<BLOCK><|title|>[1,2,3,4]<FORK>Hi<eos>", ["<FORK> in flat"]),
    ("", ["missing <eos>"]),
    ("<eos>", []),
])
def test_parse_repairs_malformed_output(text, expect):
    r = parse_flat(text, 1000, 1000)
    assert len(r.repairs) == len(expect), r.repairs
    for want, got in zip(expect, r.repairs):
        assert want in got
    for b in r.page.blocks:  # whatever came in, every box is valid
        x1, y1, x2, y2 = b.bbox
        assert 0 <= x1 <= x2 <= 1000 and 0 <= y1 <= y2 <= 1000


def test_parse_keeps_content_of_broken_blocks():
    r = parse_flat("<BLOCK><|text_block|>[0,0,10,10]<CHILD>one<BLOCK><|zz|>[5,5]<CHILD>two", 100, 100)
    assert [b.content for b in r.page.blocks] == ["one", "two"]
    assert [b.category for b in r.page.blocks] == ["text_block", "text_block"]


def test_tree_with_missing_or_extra_branches():
    tree = TreeText("<BLOCK><|title|>[0,0,1,1]<FORK><BLOCK><|title|>[0,0,1,1]<FORK><eos>", ["<CHILD>a<eos>"])
    r = parse_tree(tree)
    assert [b.content for b in r.page.blocks] == ["a", ""]
    assert any("branches" in x for x in r.repairs)
    # a branch cut before its <eos> still splices
    assert tree_to_flat(TreeText("<BLOCK><|title|>[0,0,1,1]<FORK><eos>", ["<CHILD>abc"])).endswith("<CHILD>abc<eos>")


def test_block_without_child_keeps_its_text():
    r = parse_flat("<BLOCK><|title|>[1,2,3,4]Hi<eos>")
    assert [b.content for b in r.page.blocks] == ["Hi"]
