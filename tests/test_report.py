"""report.html's structure: the strategy beside its baseline first (rounded ratios), plots,
pages drawn with their regions coloured by branch and their Markdown, raw figures last.
(The HTML is checked as a tree here; how it looks at 1280 px: tests/test_report_width.py.)"""
import base64
import io

from bs4 import BeautifulSoup
from PIL import Image

from treedec.page import Block
from treedec.report.html import write_report
from treedec.report.lead import PageView, lead_rows, why
from treedec.report.plots import BRANCH_COLOURS, draw_regions

SUMMARY = {"strategy": "padoc", "pages": 2, "text_edit": 0.03312, "layout_f1": 0.9712, "median_steps": 64.0,
           "pages_per_s": 1.2345, "p95_latency_s": 3.2109, "steps_ratio": 1.5625, "throughput_ratio": 1.4444,
           "p95_ratio": 1.2,
           "baseline": {"strategy": "sequential", "text_edit": 0.0331, "layout_f1": 0.97, "median_steps": 100.0,
                        "pages_per_s": 0.85, "p95_latency_s": 3.85}}


def _rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def test_regions_are_drawn_in_the_colour_of_their_branch():
    page = Image.new("RGB", (1000, 2000), "white")
    blocks = [Block("text_block", (100, 100, 900, 500)), Block("title", (100, 1000, 900, 1500))]
    tree = draw_regions(page, blocks, (1000, 2000), by_branch=True, width=500)
    flat = draw_regions(page, blocks, (1000, 2000), by_branch=False, width=500)
    assert tree.size == (500, 1000)
    assert tree.getpixel((250, 500)) == _rgb(BRANCH_COLOURS[1])  # block 2's top edge at y=1000/2
    assert flat.getpixel((250, 500)) == _rgb(BRANCH_COLOURS[0])
    assert tree.getpixel((250, 50)) == _rgb(BRANCH_COLOURS[0]) and tree.getpixel((250, 150)) == (255, 255, 255)
    half = draw_regions(Image.new("RGB", (500, 1000), "white"), blocks, (1000, 2000), by_branch=True, width=500)
    assert half.getpixel((250, 500)) == _rgb(BRANCH_COLOURS[1])  # a downscaled page: boxes still in page pixels


def test_report_leads_with_the_comparison_then_plots_pages_and_raw_figures_last(tmp_path):
    png = tmp_path / "steps_hist.png"
    Image.new("RGB", (20, 10), "white").save(png)
    buf = io.BytesIO()
    Image.new("RGB", (40, 50), "white").save(buf, "JPEG")
    views = [PageView("doc.p001", base64.b64encode(buf.getvalue()).decode(), "# Title <x>\n\nbody", []),
             PageView("zero", None, "", ["unreadable: empty file (0 bytes)"])]
    per_page = {"doc.p001": {"steps": 3, "flags": []}, "zero": {"steps": 0, "flags": ["unreadable: empty file"]},
                "more": {"steps": 1, "flags": []}}
    path = write_report(tmp_path, SUMMARY, per_page, [png], title="treedec run", lead=lead_rows(SUMMARY),
                        lead_names=("padoc", "sequential"), alerts=["the default model reads synthetic pages only"],
                        views=views, notes=["one level"])
    soup = BeautifulSoup(path.read_text(), "html.parser")
    body = [el for el in soup.body.children if el.name]
    assert [el.name for el in body[:3]] == ["h1", "p", "table"] and "alert" in body[1]["class"]
    assert "lead" in body[2]["class"]
    heads = [h.get_text() for h in soup.find_all("h2")]
    assert heads == ["Plots", "Pages as parsed (the first 2 of 3)", "Pages (3)", "All figures (summary.json)"]
    rows = [[td.get_text() for td in tr.find_all(["td", "th"])] for tr in body[2].find_all("tr")]
    assert rows[0] == ["figure", "padoc", "sequential (baseline)", "ratio (> 1: padoc better)"]
    assert rows[1] == ["text edit distance (lower is better)", "0.033", "0.033", "1.00x"]
    assert rows[3] == ["critical-path steps per page (median)", "64", "100", "1.56x"]
    assert rows[4] == ["pages/s", "1.23", "0.85", "1.44x"] and rows[5][3] == "1.20x"
    views_html = soup.find_all("div", class_="view")
    assert len(views_html) == 2
    first = views_html[0]
    assert first.find("img")["src"].startswith("data:image/jpeg;base64,") and "# Title <x>" in first.find("pre").text
    assert "empty file" in views_html[1].get_text() and views_html[1].find("img") is None
    raw = soup.find_all("table")[-1].get_text()
    assert "baseline.pages_per_s" in raw  # every scalar, last


def test_without_a_baseline_the_lead_table_says_how_to_get_one(tmp_path):
    s = {k: v for k, v in SUMMARY.items() if k not in ("baseline", "steps_ratio", "throughput_ratio", "p95_ratio")}
    soup = BeautifulSoup(write_report(tmp_path, s, {}, [], lead=lead_rows(s), lead_names=("padoc", None))
                         .read_text(), "html.parser")
    lead = soup.find("table", class_="lead")
    assert [th.get_text() for th in lead.find_all("th")] == ["figure", "padoc"]
    assert "compare=sequential" in lead.find_next("p").get_text()


def test_ratios_are_coloured_by_direction_and_the_lead_says_why_steps_and_wall_time_differ(tmp_path):
    base = {**SUMMARY["baseline"], "forward_passes": 400, "decode_per_forward_s": 0.010,
            "phases_s": {"load": 0.5, "draft": 0.0, "decode": 4.0, "write": 0.1, "total": 4.6}}
    s = {**SUMMARY, "throughput_ratio": 0.8, "forward_passes": 250, "decode_per_forward_s": 0.020,
         "phases_s": {"load": 0.5, "draft": 1.5, "decode": 5.0, "write": 0.1, "total": 7.1}, "baseline": base}
    soup = BeautifulSoup(write_report(tmp_path, s, {}, [], lead=lead_rows(s), lead_names=("padoc", "sequential"),
                                      lead_notes=[why(s)]).read_text(), "html.parser")
    ratio = {tr.find("td").get_text(): tr.find_all("td")[-1] for tr in soup.find("table", class_="lead").find_all("tr")[1:]}
    assert ratio["critical-path steps per page (median)"]["class"] == ["ratio", "better"]
    assert ratio["pages/s"]["class"] == ["ratio", "worse"] and ratio["pages/s"].get_text() == "0.80x"
    assert ratio["text edit distance (lower is better)"]["class"] == ["ratio", "same"]
    assert ratio["forward passes, whole run (pages batched)"].get_text() == "1.60x"
    assert ratio["decode seconds per forward pass"].get_text() == "0.50x"
    text = soup.find("table", class_="lead").find_next("p").get_text()
    assert "steps ratio is 1.56x, the pages/s ratio 0.80x" in text and "(250 against 400)" in text
    assert "20.0 ms against 10.0 ms" in text and "2.10 s against 0.60 s" in text


def test_a_timeline_title_counts_the_steps_its_axis_shows():
    """HSD's stage-1 steps are on a page's path (`steps`) but not on its decode timeline: the
    title names them apart instead of counting them as the axis's steps."""
    from treedec.report.plots import timeline_title
    from treedec.engine.page_decoding import PageDecoding
    from treedec.page import Page
    from treedec.records import PageRecord

    d = PageDecoding(name="p", sample=None, steps=12, timeline=[[0]] * 7)
    d.graph.root([1])
    d.graph.append(0, [2] * 20)
    d.graph.append(d.graph.fork(0, 1).id, [3] * 10)  # 30 tokens in 2 streams
    rec = PageRecord("p", Page(1, 1, []), "", d)
    assert timeline_title(rec).startswith("p: 7 steps (+5 before decoding),")
    d.steps = 7
    assert timeline_title(rec) == "p: 7 steps, 30 tokens, 2 streams"
