"""Block matching (quick match) and reading order on hand cases."""
import pytest

from test_metrics_text import make_page
from treedec.results.evaluate import evaluate_pages

PARAS = ["alpha beta gamma delta", "one two three four five", "red green blue yellow", "north south east west"]


def md(*texts: str) -> str:
    return "\n\n".join(texts) + "\n"


def test_swapped_blocks_give_known_reading_order_distance():
    # GT orders 1,2,3,4; predicted order 1,3,2,4. Levenshtein([1,2,3,4], [1,3,2,4]) = 2
    # substitutions, over 4 elements: 0.5. Every block is still read perfectly.
    gt = make_page([("text_block", t) for t in PARAS])
    r = evaluate_pages({"p": md(PARAS[0], PARAS[2], PARAS[1], PARAS[3])}, [gt])
    assert r["reading_order_edit"] == pytest.approx(0.5)
    assert r["text_edit"] == 0.0


def test_a_dropped_block_counts_in_text_and_order():
    # The last block is unmatched: its 18 word characters are all edits, of 19+19+18+18 = 74
    # on the page; the order sequence [1,2,3] lacks one of [1,2,3,4]: 1/4.
    gt = make_page([("text_block", t) for t in PARAS])
    r = evaluate_pages({"p": md(*PARAS[:3])}, [gt])
    assert r["reading_order_edit"] == pytest.approx(0.25)
    assert r["text_edit"] == pytest.approx(18 / 74)


def test_a_paragraph_split_in_two_is_joined():
    gt = make_page([("text_block", "the quick brown fox jumps over the lazy dog today"), ("text_block", PARAS[1])])
    r = evaluate_pages({"p": md("the quick brown fox jumps", "over the lazy dog today", PARAS[1])}, [gt])
    assert r["text_edit"] == 0.0


def test_truncated_blocks_are_merged_before_matching():
    gt = make_page([("text_block", "first half of a sentence "), ("text_block", "and its second half"),
                    ("text_block", PARAS[0])])
    gt.relations = [{"source_anno_id": 0, "target_anno_id": 1, "relation_type": "truncated"}]
    r = evaluate_pages({"p": md("first half of a sentence and its second half", PARAS[0])}, [gt])
    assert r["text_edit"] == 0.0 and r["per_page"]["p"]["text_samples"] == 2


def test_ignored_categories_never_count():
    gt = make_page([("header", "Journal of Things"), ("text_block", PARAS[0]), ("page_number", "12")])
    with_furniture = evaluate_pages({"p": md("Journal of Things", PARAS[0], "12")}, [gt])
    without = evaluate_pages({"p": md(PARAS[0])}, [gt])
    assert with_furniture["text_edit"] == without["text_edit"] == 0.0
    assert with_furniture["per_page"]["p"]["text_samples"] == 1


def test_display_formulas_share_the_text_pool():
    gt = make_page([("text_block", PARAS[0]), ("equation_isolated", "a^{2}+b^{2}=c^{2}")])
    r = evaluate_pages({"p": md(PARAS[0], "$$\na^{2}+b^{2}=c^{2}\n$$")}, [gt])
    assert r["formula_edit"] == 0.0 and r["text_edit"] == 0.0
    # in \[...\] form, with one wrong character of the 17 in "a^{2}+b^{2}=c^{2}"
    r = evaluate_pages({"p": md(PARAS[0], "\\[a^{2}+b^{2}=d^{2}\\]")}, [gt])
    assert r["formula_edit"] == pytest.approx(1 / 17)


def test_missing_prediction_scores_as_empty_and_is_flagged():
    gt = make_page([("text_block", t) for t in PARAS])
    r = evaluate_pages({}, [gt])
    page = r["per_page"]["p"]
    assert page["text_edit"] == 1.0 and page["reading_order_edit"] == 1.0
    assert page["flags"] == ["no prediction: scored as empty"]
    assert r["pages"] == 1 and r["pages_flagged"] == 1
