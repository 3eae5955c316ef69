"""Our figures on the 12 OmniDocBench demo pages against the official evaluator's
(`official_metrics.json`, OmniDocBench v1.5 at 7bd6c2e, quick_match). Skips when
../shared/omnidocbench_demo is absent."""
import json

import pytest

from conftest import DEMO
from treedec.results.evaluate import evaluate_pages, load_predictions, load_raw_predictions

TOLERANCE = 1e-9  # the implementations agree to rounding


@pytest.fixture(scope="module", params=["md files", "format=markdown"])
def figures(demo_pages, request):
    """The predictions read as Markdown files, and as raw outputs of the `markdown` format."""
    if request.param == "md files":
        preds, flags = load_predictions(DEMO / "predictions_md", demo_pages)
    else:
        from treedec.formats import get_format

        preds, flags = load_raw_predictions(DEMO / "predictions_md", demo_pages, get_format("markdown"))
    return evaluate_pages(preds, demo_pages, flags)


@pytest.fixture(scope="module")
def official(demo_pages):
    return json.loads((DEMO / "official_metrics.json").read_text())["metrics"]


def test_text_and_reading_order_match(figures, official):
    text, order = official["text_block_edit"]["overall"], official["reading_order_edit"]["overall"]
    assert figures["text_edit"] == pytest.approx(text["ALL_page_avg"], abs=TOLERANCE)
    assert figures["text_edit_all"] == pytest.approx(text["edit_whole"], abs=TOLERANCE)
    assert figures["text_samples"] == official["text_block_edit"]["n_samples"]
    assert figures["reading_order_edit"] == pytest.approx(order["ALL_page_avg"], abs=TOLERANCE)
    assert figures["reading_order_edit_all"] == pytest.approx(order["edit_whole"], abs=TOLERANCE)


def test_tables_match(figures, official):
    assert figures["table_teds"] == pytest.approx(official["table_TEDS"]["overall"]["all"], abs=TOLERANCE)
    assert figures["table_teds_s"] == pytest.approx(official["table_TEDS_S"]["overall"]["all"], abs=TOLERANCE)
    assert figures["table_edit"] == pytest.approx(official["table_edit"]["overall"]["ALL_page_avg"], abs=TOLERANCE)
    assert figures["tables"] == official["table_TEDS"]["n_tables"]
    assert figures["formula_edit"] is None  # the demo pages hold no display formula


def test_every_page_matches(figures, official):
    assert figures["pages_flagged"] == 0
    for name, page in figures["per_page"].items():
        assert page["text_edit"] == pytest.approx(official["text_block_edit"]["per_page"][name], abs=TOLERANCE)
        assert page["reading_order_edit"] == pytest.approx(official["reading_order_edit"]["per_page"][name],
                                                           abs=TOLERANCE)
        tables = official["table_TEDS"]["per_table"].get(name, {})
        assert [t["teds"] for t in page["tables"]] == pytest.approx(list(tables.values()), abs=TOLERANCE)
