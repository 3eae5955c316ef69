"""Layout precision / recall / F1 at IoU 0.5 with matching category."""
import pytest

from treedec.metrics import iou, layout_counts
from treedec.page import Block, Page
from treedec.results.evaluate import evaluate_pages


def page(blocks, width=100, height=100) -> Page:
    return Page(width, height, image_path="l.jpg",
                blocks=[Block(cat, box, f"block {i}", order=i + 1) for i, (cat, box) in enumerate(blocks)])


def test_iou_hand_cases():
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0


def test_layout_counts_hand_case():
    gt = page([("text_block", (0, 0, 10, 10)), ("title", (0, 20, 10, 30)), ("table", (0, 40, 10, 50))])
    pred = page([("text_block", (0, 0, 10, 10)),  # exact: matched
                 ("text_block", (0, 21, 10, 30)),  # IoU 0.9 with the title, wrong category
                 ("table", (5, 40, 15, 50))])  # right category, IoU 1/3 < 0.5
    c = layout_counts(pred, gt)
    assert (c.matched, c.predicted, c.annotated) == (1, 3, 3)
    assert c.precision == c.recall == c.f1 == pytest.approx(1 / 3)


def test_each_box_is_used_once_and_extra_boxes_cost_precision():
    gt = page([("text_block", (0, 0, 10, 10))])
    pred = page([("text_block", (0, 0, 10, 10)), ("text_block", (0, 0, 10, 9))])
    c = layout_counts(pred, gt)
    assert (c.precision, c.recall) == (0.5, 1.0)
    assert c.f1 == pytest.approx(2 / 3)


def test_predicted_boxes_are_scaled_to_the_ground_truth_size():
    gt = page([("text_block", (0, 0, 10, 10))])
    pred = page([("text_block", (0, 0, 20, 20))], width=200, height=200)
    assert layout_counts(pred, gt).f1 == 1.0


def test_layout_figures_only_for_page_predictions():
    gt = page([("text_block", (0, 0, 10, 10))])
    assert evaluate_pages({"l": "block 0\n"}, [gt])["layout_f1"] is None
    assert evaluate_pages({"l": page([("text_block", (0, 0, 10, 10))])}, [gt])["layout_f1"] == 1.0
