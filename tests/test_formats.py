"""Output formats (treedec.formats): the contract every format keeps, render -> parse on the demo
pages as far as each format can say it, parsers that never raise, picking a format."""
from __future__ import annotations

import pytest

from treedec.errors import UserError
from treedec.formats import FORMATS, get_format, resolve_format
from treedec.page import Block, Page

NAMES = FORMATS.names()


def _page() -> Page:
    return Page(800, 1000, [Block("title", (40, 30, 700, 80), "A title", 0),
                            Block("text_block", (40, 100, 760, 300), 'Some "quoted" text\\ with a\nbreak', 1),
                            Block("table", (40, 320, 760, 600), "<table><tr><td>1</td><td>2</td></tr></table>", 2),
                            Block("equation_isolated", (100, 620, 700, 680), "x^2 + y^2 = z^2", 3)],
                image_path="p/page.png")


def test_registry_and_errors():
    assert "treedec" in NAMES
    with pytest.raises(UserError, match="did you mean 'treedec'"):
        get_format("treedek")


def test_resolve_format_order():
    assert resolve_format("treedec", "other", True) == "treedec"
    assert resolve_format(None, "treedec", False) == "treedec"
    assert resolve_format(None, None, True) == "treedec"
    with pytest.raises(UserError, match="model.format=NAME"):
        resolve_format(None, None, False)
    with pytest.raises(UserError, match="unknown format"):
        resolve_format("nope", None, True)


@pytest.mark.parametrize("name", NAMES)
def test_spans_hold_each_blocks_content(name):
    fmt = get_format(name)
    text = fmt.render(_page())
    spans = fmt.block_spans(text)
    written = [fmt.content_text(b) for b in _page().reading_order() if fmt.content_text(b)]
    assert [text[a:b] for a, b in spans if b > a] == written


@pytest.mark.parametrize("name", NAMES)
def test_prompts_of_each_mode(name):
    fmt = get_format(name)
    assert fmt.prompt("page")
    if fmt.forks:
        assert fmt.prompt("tree") and fmt.render_tree(_page()).branches
    else:
        with pytest.raises(UserError, match="no fork protocol"):
            fmt.render_tree(_page())
    if fmt.two_stage:
        assert fmt.prompt("layout") and fmt.prompt("crop", "table")
