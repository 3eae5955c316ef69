"""Drafting the layout stream line by line (`layout=lines`): what it proposes after a wrong
field, a wrong category, a closed box; and that it gets back in step sooner than n-gram
matching when the draft layout is off."""
import pytest

from treedec.drafters.layout_lines import LayoutLines, layout_tree
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import continue_draft, grid_values
from treedec.formats.contract import page_to_tree
from treedec.page import Block, Page

from engine_helpers import TOK


def lines(layout: str, grid: int | None = None, page: Page | None = None) -> LayoutLines:
    return LayoutLines.of(TOK.encode(layout), TOK, grid_values(TOK, page, grid) if grid else None)


def texts(d: LayoutLines, typed: str, depth: int = 40) -> list[str]:
    return [TOK.decode(c) for c in d.candidates(TOK.encode(typed), depth)]


DRAFT = "<BLOCK><|title|>[62,62,938,125]<FORK><BLOCK><|text_block|>[62,188,875,438]<FORK><eos>"


def test_a_drafted_line_continues_whole_then_the_next_lines():
    d = lines(DRAFT)
    assert texts(d, "")[0] == DRAFT
    assert texts(d, "<BLOCK><|title|>[62,6")[0] == "2,938,125]<FORK><BLOCK><|text_block|>[62,188,875,438]<FORK><eos>"


def test_a_wrong_field_keeps_the_drafts_later_fields():
    d = lines(DRAFT)
    # the target wrote 938 where the draft has 875: the rest of that line still drafts
    got = texts(d, "<BLOCK><|text_block|>[62,188,938")
    assert got[0] == ",438]<FORK><eos>"
    # a value being typed is completed from values drafted for that field
    assert "38,438]<FORK><eos>" in texts(d, "<BLOCK><|text_block|>[62,188,9")


def test_another_category_keeps_the_drafted_box():
    d = lines(DRAFT)
    got = texts(d, "<BLOCK><|header|>")
    assert "[62,62,938,125]<FORK><BLOCK><|text_block|>[62,188,875,438]<FORK><eos>" in got


def test_a_closed_box_goes_on_with_the_next_drafted_lines():
    d = lines(DRAFT)
    got = texts(d, "<BLOCK><|title|>[62,62,938,188]")  # a box the draft does not have
    assert got[0] == "<FORK><BLOCK><|text_block|>[62,188,875,438]<FORK><eos>"


def test_grid_values_complete_a_coordinate_the_draft_lacks():
    page = Page(width=256, height=256, blocks=[])
    with_grid = lines(DRAFT, grid=16, page=page)
    typed = "<BLOCK><|text_block|>[62,188,875,5"  # 500 and 562 lie on a 16 px grid of a 256 px page
    assert not any(t.startswith("00") for t in texts(lines(DRAFT), typed))
    got = texts(with_grid, typed)
    assert "00]<FORK><eos>" in got and "62]<FORK><eos>" in got


def _steps(target: list[int], propose) -> int:
    """Forward steps of a target that accepts the longest agreeing draft path + one token."""
    own, steps = [], 0
    while len(own) < len(target):
        tree, n, node = propose(own), 0, -1
        while tree is not None and len(own) + n < len(target):
            kids = [i for i, p in enumerate(tree.parents) if p == node and tree.tokens[i] == target[len(own) + n]]
            if not kids:
                break
            node, n = kids[0], n + 1
        own += target[len(own):len(own) + n + 1]
        steps += 1
    return steps


@pytest.mark.parametrize("seed", range(6))
def test_lines_get_back_in_step_sooner_than_ngrams(seed):
    """A draft layout with a box one row short, a category wrong and two blocks merged:
    decoding the true layout against it takes fewer steps line by line than n-gram-wise,
    and never more than with no draft."""
    import random

    rng = random.Random(seed)
    blocks = [Block(rng.choice(["text_block", "title"]), (16, 16 + 48 * k, rng.choice([128, 224, 240]), 48 + 48 * k),
                    "x") for k in range(5)]
    truth = Page(width=256, height=256, blocks=blocks)
    bad = [Block(b.category, b.bbox, b.content) for b in blocks]
    bad[0].bbox = (16, 16, bad[0].bbox[2], 32)
    bad[1].category = "header"
    bad[3] = Block("text_block", (16, bad[3].bbox[1], 240, bad[4].bbox[3]), "x")
    del bad[4]
    draft = Page(width=256, height=256, blocks=bad)
    target = TOK.encode(page_to_tree(truth).layout)
    flat_draft = TOK.encode(page_to_tree(draft).layout)
    d = lines(page_to_tree(draft).layout, grid=16, page=draft)
    m = NgramMatcher(fuzzy=4)
    by_lines = _steps(target, lambda own: layout_tree(own, [d], 15, 128) or continue_draft(own, [flat_draft], m))
    by_ngrams = _steps(target, lambda own: continue_draft(own, [flat_draft], m))
    assert by_lines < by_ngrams <= len(target)
    assert _steps(target, lambda own: layout_tree(own, [lines(page_to_tree(truth).layout)], 15, 128)) \
        == -(-len(target) // 16)  # a perfect draft: 15 + 1 tokens a step
