"""The layout error breakdown accounts for exactly what layout F1 misses."""
import random

from treedec.metrics import layout_counts
from treedec.metrics.layout_errors import layout_errors, tally
from treedec.page import Block, Page


def page(blocks, width=100, height=100) -> Page:
    return Page(width, height, image_path="l.jpg",
                blocks=[Block(cat, box, f"block {i}", order=i + 1) for i, (cat, box) in enumerate(blocks)])


def test_hand_case_each_kind():
    gt = page([("text_block", (0, 0, 10, 10)), ("title", (0, 20, 10, 30)), ("table", (0, 40, 10, 50)),
               ("footer", (0, 90, 10, 100))])
    pred = page([("text_block", (0, 0, 10, 10)),  # matched
                 ("header", (0, 21, 10, 30)),  # covers the title: a category error
                 ("table", (5, 40, 15, 50)),  # IoU 1/3: a box error
                 ("figure", (50, 50, 60, 60))])  # nothing there: extra; the footer is missed
    assert tally(layout_errors(pred, gt)) == {"category title -> header": 1, "box table": 1, "missed footer": 1,
                                              "extra figure": 1}


def test_predictions_are_scaled_to_the_ground_truth_page():
    gt = page([("title", (0, 0, 50, 50))])
    pred = page([("title", (0, 0, 100, 100))], width=200, height=200)
    assert layout_errors(pred, gt) == []


def test_errors_account_for_every_f1_miss_on_random_pages():
    rng = random.Random(0)
    cats = ["text_block", "title", "header"]

    def box():
        x, y = rng.randint(0, 80), rng.randint(0, 80)
        return (x, y, x + rng.randint(5, 20), y + rng.randint(5, 20))

    for _ in range(300):
        gt = page([(rng.choice(cats), box()) for _ in range(rng.randint(0, 6))])
        pred = page([(rng.choice(cats), box()) for _ in range(rng.randint(0, 6))]
                    + [(rng.choice(cats), b.bbox) for b in gt.blocks if rng.random() < 0.5])
        c, errs = layout_counts(pred, gt), layout_errors(pred, gt)
        assert sum(e.kind != "extra" for e in errs) == c.annotated - c.matched
        used = {id(e.pred) for e in errs if e.pred is not None}
        assert len(used) == c.predicted - c.matched
