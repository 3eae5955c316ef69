"""The evaluate command: outputs, report and user errors."""
import json

import pytest

from test_metrics_text import RICH_PAGE, make_page
from treedec.commands.evaluate import evaluate_dir as main
from treedec.errors import UserError
from treedec.io import page_to_markdown, save_omnidocbench
from treedec.report.html import write_report


@pytest.fixture()
def case(tmp_path):
    pages = [make_page(RICH_PAGE, "a"), make_page(RICH_PAGE[:2], "b"), make_page(RICH_PAGE[2:], "c")]
    save_omnidocbench(pages, tmp_path / "gt.json")
    (tmp_path / "pred").mkdir()
    (tmp_path / "pred" / "a.md").write_text(page_to_markdown(pages[0]), encoding="utf-8")
    (tmp_path / "pred" / "b.md").write_text("Results of the surrey\n", encoding="utf-8")
    return tmp_path


def test_evaluate_writes_summary_pages_and_report(case):
    summary = main(str(case / "pred"), str(case / "gt.json"), case / "out")
    out = case / "out"
    on_disk = json.loads((out / "summary.json").read_text())
    for key in ("text_edit", "text_edit_all", "table_teds", "table_teds_s", "formula_edit",
                "reading_order_edit", "overall", "layout_f1", "pages", "per_page"):
        assert key in on_disk
    assert on_disk["pages"] == 3 and set(on_disk["per_page"]) == {"a", "b", "c"}
    assert on_disk["per_page"]["c"]["flags"] == ["no prediction: scored as empty"]
    assert json.loads((out / "pages" / "a.json").read_text())["text_edit"] == 0.0
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2 and "CDM" in html
    assert summary["overall"] == on_disk["overall"]


@pytest.mark.parametrize("which", ["pred", "gt"])
def test_missing_inputs_raise_one_line_user_errors(case, which):
    pred, gt = str(case / "pred"), str(case / "gt.json")
    with pytest.raises(UserError) as e:
        main(pred + "-nope" if which == "pred" else pred, gt + "-nope" if which == "gt" else gt, case / "out")
    assert which in str(e.value) and "\n" not in str(e.value)


def test_unreadable_ground_truth_is_a_user_error(case):
    (case / "bad.json").write_text("[{\"layout_dets\": []}]")
    with pytest.raises(UserError, match="not OmniDocBench JSON"):
        main(str(case / "pred"), str(case / "bad.json"), case / "out")


def test_report_escapes_and_embeds(tmp_path):
    png = tmp_path / "x.png"
    png.write_bytes(b"\x89PNG fake")
    path = write_report(tmp_path, {"text_edit": 0.5, "note": "<b>"}, {"p<1>": {"text_edit": None, "flags": ["f&g"]}},
                        [png])
    html = path.read_text()
    assert "&lt;b&gt;" in html and "p&lt;1&gt;" in html and "f&amp;g" in html
    assert "data:image/png;base64,iVBORyBmYWtl" in html


def test_cli_evaluate_on_the_demo(tmp_path):
    import json
    from cli_helpers import treedec_here
    from conftest import DEMO

    if not DEMO.is_dir():
        pytest.skip("../shared/omnidocbench_demo is absent")
    r = treedec_here("evaluate", f"pred={DEMO / 'predictions_md'}", f"gt={DEMO / 'OmniDocBench_demo.json'}",
                     f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["pages"] == 12 and (tmp_path / "report.html").is_file()
    assert abs(s["text_edit"] - 0.4334536718) < 1e-9 and "meta" in s
    r = treedec_here("evaluate", f"out={tmp_path / 'x'}")
    assert r.returncode == 2 and "gt, pred must be set" in r.stderr
