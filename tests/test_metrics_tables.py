"""TEDS on hand-computed tables, pipe tables, and malformed HTML."""
import pytest

from treedec.metrics import markdown_to_blocks, normalize_table_html, teds
from treedec.metrics.markdown_tables import pipe_tables_to_html
from treedec.page import Block, Page
from treedec.results.evaluate import evaluate_pages

GT = "<table><tr><td>ab</td><td>cd</td></tr><tr><td>ef</td><td>gh</td></tr></table>"


def norm_teds(pred: str, gt: str, structure_only: bool = False) -> float:
    return teds(normalize_table_html(pred), normalize_table_html(gt), structure_only)


def test_identical_tables_score_one():
    assert norm_teds(GT, GT) == 1.0


def test_one_edited_cell_gives_known_teds():
    # The tree below <table> has 6 elements (2 tr + 4 td). Renaming the cell "gh" -> "gx"
    # costs its normalized edit distance 1/2; nothing else changes, so
    # TEDS = 1 - 0.5 / 6 = 11/12. Structure is unchanged, so TEDS-S = 1.
    pred = GT.replace("gh", "gx")
    assert norm_teds(pred, GT) == pytest.approx(11 / 12)
    assert norm_teds(pred, GT, structure_only=True) == 1.0


def test_a_missing_row_costs_its_elements():
    # Deleting the second <tr> and its 2 cells costs 3 of 6 elements: TEDS = 1 - 3/6.
    pred = "<table><tr><td>ab</td><td>cd</td></tr></table>"
    assert norm_teds(pred, GT) == pytest.approx(0.5)


def test_header_cells_and_styling_are_normalized_away():
    pred = '<table style="x"><thead><tr><th>ab</th><th>cd</th></tr></thead><tbody><tr><td>ef</td>' \
           '<td><span>gh</span></td></tr></tbody></table>'
    assert norm_teds(pred, GT) == 1.0


def test_pipe_table_becomes_the_same_table():
    blocks = markdown_to_blocks("| ab | cd |\n|---|---|\n| ef | gh |\n")
    tables = [b for b in blocks if b.kind == "table"]
    assert len(tables) == 1
    assert norm_teds(tables[0].content, GT) == 1.0


def test_pipe_cells_with_a_colon_are_dropped_as_officially():
    # The official converter drops every row line holding ':' (meant for separator rows).
    html = pipe_tables_to_html("| a: 1 | b |\n| c | d |\n")
    assert "a: 1" not in html and '<td colspan="1" rowspan="1">b</td>' in html


@pytest.mark.parametrize("bad", ["<table><tr><td colspan='x'>a</td></tr></table>", "<table><tr><td>a",
                                 "</table>", "<table>", "", "no table at all", "<table><table></td>"])
def test_malformed_tables_score_zero_or_more_without_crashing(bad):
    assert 0.0 <= norm_teds(bad, GT) <= 1.0


def test_unparseable_spans_score_zero():
    assert norm_teds("<table><tr><td colspan='x'>ab</td><td>cd</td></tr></table>", GT) == 0.0


def test_page_with_malformed_table_is_scored_and_flagged():
    gt = Page(100, 100, image_path="t.jpg", blocks=[Block("table", (0, 0, 100, 100), GT, order=1)])
    r = evaluate_pages({"t": "<table><tr><td>ab</td><td>cd"}, [gt])
    page = r["per_page"]["t"]
    assert page["table_teds"] is not None and 0.0 <= page["table_teds"] < 1.0
    assert any("unbalanced HTML tables" in f for f in page["flags"])
