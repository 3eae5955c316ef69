import json

from treedec.io import page_to_markdown, page_to_omnidocbench, save_omnidocbench, load_omnidocbench
from treedec.page import Block, Page

from conftest import DEMO


def test_omnidocbench_round_trip_is_exact(demo_pages):
    original = json.loads((DEMO / "OmniDocBench_demo.json").read_text(encoding="utf-8"))
    assert [page_to_omnidocbench(p) for p in demo_pages] == original


def test_save_load(tmp_path, synth_pages):
    save_omnidocbench(synth_pages[:5], tmp_path / "p.json")
    back = load_omnidocbench(tmp_path / "p.json")
    assert [page_to_omnidocbench(p) for p in back] == [page_to_omnidocbench(p) for p in synth_pages[:5]]


def test_markdown_tables_html_and_formulas_display():
    page = Page(100, 100, [
        Block("equation_isolated", (0, 50, 10, 60), "x^{2}", order=3),
        Block("title", (0, 0, 10, 10), "Intro", order=1),
        Block("table", (0, 20, 10, 40), "<table><tr><td>1</td></tr></table>", order=2),
        Block("figure", (0, 70, 10, 80), "", order=4),
    ])
    md = page_to_markdown(page)
    assert md == "# Intro\n\n<table><tr><td>1</td></tr></table>\n\n$$\nx^{2}\n$$\n"


def test_reading_order_puts_unordered_blocks_last():
    page = Page(10, 10, [Block("page_number", (0, 0, 1, 1), "3"), Block("text_block", (0, 0, 1, 1), "b", order=2),
                         Block("text_block", (0, 0, 1, 1), "a", order=1)])
    assert [b.content for b in page.reading_order()] == ["a", "b", "3"]
