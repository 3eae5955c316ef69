"""Malformed predictions never crash the evaluator: they are scored (as empty when
unreadable) and flagged."""
import json
import random

import pytest

from test_metrics_text import RICH_PAGE, make_page
from treedec.metrics import markdown_to_blocks
from treedec.results.evaluate import evaluate_pages, load_predictions

NASTY = [
    "", "\n\n\n", "$$", "$$ \\frac{ $$ $ \\[ ``` | a |\n|", "<table><tr><td>unclosed", "</table></table>",
    "<table><table><tr><td colspan='two'>x</td></tr>", "| a | b |\n| c |\n|", "\\begin{tabular}{cc} a & b",
    "\\begin{table}\\begin{tabular}x\\end{tabular}", "```python\nprint(1)", "$" * 101, "|" * 50 + "\n" * 3,
    "\\[\\begin{array}{l} a \\\\ \\end{array}\\]", "<math alttext='x'>", "\x00\x01\ufffd", "# " * 300,
    "<table><tr><td>a</td></tr></table>" * 5,
]


def random_markdown(rng: random.Random) -> str:
    pieces = ["$", "$$", "\\[", "\\]", "|", "\n", "\n\n", "<table>", "</table>", "<tr>", "<td>", "</td>",
              "```", "\\begin{tabular}", "\\end{tabular}", "word", " ", "#", "![](x.png)", ":", "---", "{", "}"]
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 80)))


@pytest.mark.parametrize("text", NASTY)
def test_nasty_markdown_is_scored_without_crashing(text):
    gt = make_page(RICH_PAGE)
    r = evaluate_pages({"p": text}, [gt])
    page = r["per_page"]["p"]
    assert 0.0 <= page["text_edit"] <= 1.0
    assert 0.0 <= r["overall"] <= 100.0


def test_random_markdown_never_crashes():
    rng = random.Random(0)
    gt = make_page(RICH_PAGE)
    for _ in range(150):
        text = random_markdown(rng)
        markdown_to_blocks(text)
        assert evaluate_pages({"p": text}, [gt])["pages"] == 1


def test_unbalanced_markdown_is_flagged():
    r = evaluate_pages({"p": "<table><tr><td>x\n\n$$ a"}, [make_page(RICH_PAGE)])
    flags = r["per_page"]["p"]["flags"]
    assert any("unbalanced HTML tables" in f for f in flags) and any("$$" in f for f in flags)


def test_prediction_folder_with_bad_files(tmp_path):
    gts = [make_page(RICH_PAGE, name) for name in ("good", "badjson", "notpage", "missing", "latin1")]
    (tmp_path / "good.md").write_text("Results of the survey\n", encoding="utf-8")
    (tmp_path / "badjson.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "notpage.json").write_text(json.dumps({"figures": 1}), encoding="utf-8")
    (tmp_path / "notpage.md").write_text("The first paragraph says one thing.\n", encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    preds, flags = load_predictions(tmp_path, gts)
    assert set(preds) == {"good", "notpage", "latin1"}  # notpage.json is no page: its .md is used
    assert "could not be read" in flags["badjson"][0] and "not valid UTF-8" in flags["latin1"][0]
    r = evaluate_pages(preds, gts, flags)
    assert r["pages"] == 5 and r["per_page"]["missing"]["flags"] == ["no prediction: scored as empty"]
    assert r["per_page"]["badjson"]["text_edit"] == 1.0
    assert r["per_page"]["good"]["flags"] == []


def test_page_json_prediction_is_read(tmp_path):
    from treedec.io import save_omnidocbench

    gt = make_page(RICH_PAGE, "j")
    save_omnidocbench(make_page(RICH_PAGE, "j"), tmp_path / "j.json")
    preds, flags = load_predictions(tmp_path, [gt])
    r = evaluate_pages(preds, [gt], flags)
    assert r["text_edit"] == 0.0 and r["layout_f1"] == 1.0
