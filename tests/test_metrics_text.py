"""Text and formula normalization, edit distances, and perfect scores for identical pages."""
import pytest

from treedec.io import page_to_markdown
from treedec.metrics import normalize_formula, normalize_text, normalized_edit_distance
from treedec.metrics.edit_distance import EditTally, page_average, whole
from treedec.page import Block, Page
from treedec.results.evaluate import evaluate_pages

TABLE = "<table><tr><td>ab</td><td>cd</td></tr><tr><td>ef</td><td>gh</td></tr></table>"


def make_page(blocks, name="p") -> Page:
    """A page with one block per (category, content), stacked top to bottom, in order."""
    return Page(width=100, height=100 * len(blocks), image_path=f"{name}.jpg",
                blocks=[Block(cat, (0, 100 * i, 100, 100 * i + 90), text, order=i + 1, extra={"anno_id": i})
                        for i, (cat, text) in enumerate(blocks)])


RICH_PAGE = [("title", "Results of the survey"), ("text_block", "The first paragraph says one thing."),
             ("equation_isolated", "E = m c^{2}"), ("text_block", "The second paragraph says another."),
             ("table", TABLE), ("page_number", "7")]


def test_normalize_text_keeps_word_characters_only():
    assert normalize_text("Hello, World!\n(2024)") == "HelloWorld2024"
    assert normalize_text("中文，标点。") == "中文标点"


def test_normalize_text_renders_inline_math_with_scripts():
    # `x^{2}` holds ^, so it is rendered to Unicode text ("x^2") before punctuation is dropped
    assert normalize_text("area $x^{2}$ here") == "areax2here"


def test_normalize_formula_drops_delimiters_fonts_and_spaces():
    assert normalize_formula("$$ \\mathbf{x} + \\left( y \\right) $$") == "{x}+(y)"
    assert normalize_formula("\\[ A \\tag{3} \\]") == "a"


def test_normalized_edit_distance_hand_cases():
    assert normalized_edit_distance("kitten", "sitting") == pytest.approx(3 / 7)
    assert normalized_edit_distance("", "") == 0.0
    assert normalized_edit_distance("abc", "") == 1.0


def test_page_average_and_whole_differ_as_defined():
    a, b = EditTally(), EditTally()
    a.add("aaaa", "aaab")  # 1 edit / 4
    b.add("bb", "")  # 2 edits / 2
    assert page_average([a, b]) == pytest.approx((0.25 + 1.0) / 2)
    assert whole([a, b]) == pytest.approx(3 / 6)
    assert page_average([EditTally()]) is None


def test_identical_markdown_gives_perfect_scores():
    gt = make_page(RICH_PAGE)
    r = evaluate_pages({"p": page_to_markdown(gt)}, [gt])
    assert r["text_edit"] == 0.0 and r["text_edit_all"] == 0.0
    assert r["formula_edit"] == 0.0
    assert r["table_teds"] == 1.0 and r["table_teds_s"] == 1.0
    assert r["reading_order_edit"] == 0.0
    assert r["overall"] == 100.0
    assert r["layout_f1"] is None  # Markdown has no boxes
    assert r["per_page"]["p"]["flags"] == []


def test_identical_page_prediction_gives_perfect_scores_and_layout():
    gt = make_page(RICH_PAGE)
    r = evaluate_pages({"p": make_page(RICH_PAGE)}, [gt])
    assert (r["text_edit"], r["formula_edit"], r["table_teds"], r["reading_order_edit"]) == (0.0, 0.0, 1.0, 0.0)
    assert r["layout_f1"] == 1.0


def test_an_edited_word_costs_its_characters():
    gt = make_page([("text_block", "abcdefghij")])
    r = evaluate_pages({"p": "abcdefgXYZ\n"}, [gt])
    assert r["text_edit"] == pytest.approx(3 / 10)
