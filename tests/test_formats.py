"""Output formats (treedec.formats): the contract every format keeps, render -> parse on the demo
pages as far as each format can say it, parsers that never raise, picking a format."""
from __future__ import annotations

import pytest

from treedec.errors import UserError
from treedec.formats import FORMATS, get_format, resolve_format
from treedec.page import Block, Page

NAMES = FORMATS.names()


def _page() -> Page:
    return Page(800, 1000, [Block("title", (40, 30, 700, 80), "A title", 0),
                            Block("text_block", (40, 100, 760, 300), 'Some "quoted" text\\ with a\nbreak', 1),
                            Block("table", (40, 320, 760, 600), "<table><tr><td>1</td><td>2</td></tr></table>", 2),
                            Block("equation_isolated", (100, 620, 700, 680), "x^2 + y^2 = z^2", 3)],
                image_path="p/page.png")


def test_registry_and_errors():
    assert "treedec" in NAMES
    with pytest.raises(UserError, match="did you mean 'treedec'"):
        get_format("treedek")


def test_resolve_format_order():
    assert resolve_format("treedec", "other", True) == "treedec"
    assert resolve_format(None, "treedec", False) == "treedec"
    assert resolve_format(None, None, True) == "treedec"
    with pytest.raises(UserError, match="model.format=NAME"):
        resolve_format(None, None, False)
    with pytest.raises(UserError, match="unknown format"):
        resolve_format("nope", None, True)


@pytest.mark.parametrize("name", NAMES)
def test_spans_hold_each_blocks_content(name):
    fmt = get_format(name)
    text = fmt.render(_page())
    spans = fmt.block_spans(text)
    written = [fmt.content_text(b) for b in _page().reading_order() if fmt.content_text(b)]
    assert [text[a:b] for a, b in spans if b > a] == written


@pytest.mark.parametrize("name", NAMES)
def test_prompts_of_each_mode(name):
    fmt = get_format(name)
    if fmt.two_stage:
        assert fmt.prompt("crop", "table") != fmt.prompt("crop", "text_block")
        assert fmt.detector_layout or fmt.prompt("layout")
        with pytest.raises(UserError, match="no prompt for mode 'page'"):
            fmt.prompt("page")
    else:
        assert fmt.prompt("page")
    if fmt.forks:
        assert fmt.prompt("tree") and fmt.render_tree(_page()).branches
    else:
        with pytest.raises(UserError, match="no fork protocol"):
            fmt.render_tree(_page())


def _written(fmt, page: Page) -> list[Block]:
    """The blocks `fmt` writes, in reading order (Markdown leaves out figures and empty blocks)."""
    return [b for b in page.reading_order() if fmt.boxes or fmt.content_text(b)]


def _same_content(fmt, got: Block, want: Block) -> bool:
    """The parsed content is the block's (Markdown: as it writes it; a block without written
    text: empty; a table written as OTSL: the same cells)."""
    from treedec.formats.otsl import html_to_otsl

    written = fmt.content_text(want)
    expected = written if not fmt.boxes else want.content if written else ""
    if want.category == "table" and fmt.name in ("doctags", "mineru", "paddleocr"):
        return html_to_otsl(got.content) == html_to_otsl(expected)
    return got.content == expected


@pytest.mark.parametrize("name", NAMES)
def test_render_then_parse_gives_the_page_back(name, demo_pages):
    """On the 12 demo pages: clean, the same blocks in the same order, each block's content, its
    category where the format has it, its box to the format's grid."""
    from treedec.formats.grid import Categories

    fmt = get_format(name)
    lost = next((v.lost() for v in vars(__import__(type(fmt).__module__, fromlist=["x"])).values()
                 if isinstance(v, Categories)), ())
    for page in [*demo_pages, _page()]:
        result = fmt.parse(fmt.render(page), page.width, page.height, page.image_path)
        assert result.clean, (page.name, result.repairs)
        want = _written(fmt, page)
        assert len(result.page.blocks) == len(want), page.name
        for got, b in zip(result.page.blocks, want):
            assert _same_content(fmt, got, b), (page.name, got.content[:80], b.content[:80])
            if fmt.boxes:
                assert b.category in lost or got.category == b.category
                tol = max(page.width, page.height) / (500 if name == "doctags" else 1000) + 1
                clamp = (page.width, page.height) * 2
                assert all(abs(g - min(max(w, 0), c)) <= tol for g, w, c in zip(got.bbox, b.bbox, clamp)), page.name


_NOISE = ["<BLOCK>", "<CHILD>", "<FORK>", "<eos>", "<|table|>", "[1,2", "]", "{", "}", "[", '"', "\\", ",", ":",
          '"text": "', "<doctag>", "</doctag>", "<text>", "</text>", "<loc_9", "<loc_600>", "<otsl>", "<fcel>", "<nl>",
          "<lcel>", "<ucel>", "<|box_start|>", "<|box_end|>", "<|ref_start|>", "<|md_start|>", "<|md_end|>", "$$",
          "<table>", "</table>", "# ", "\n\n", "-5", "99999", "é"]


def _variants(text: str, cut: int, a: int, b: int, edits: list[tuple[int, str]]) -> list[str]:
    """Truncated at `cut`, text[a:b] repeated, and `edits` (position, noise) applied."""
    a, b = sorted((a, b))
    edited = text
    for pos, noise in sorted(edits, reverse=True):
        edited = edited[:pos] + noise + edited[pos + len(noise) // 2:]
    return [text[:cut], text[:b] + text[a:b] * 3 + text[b:], edited]


def _reads(fmt, variants: list[str]) -> None:
    """The format's own reader copes (not the never-raising `parse`'s last resort)."""
    for variant in variants:
        result = fmt.read(variant, 800, 1000, "x.png")
        assert result.page.width == 800 and all(isinstance(b.content, str) for b in result.page.blocks)


@pytest.mark.parametrize("name", NAMES)
def test_parsers_read_any_output(name):
    """Truncated, repeated and corrupted outputs (seeded draws; hypothesis below where installed)."""
    import random

    fmt, rng = get_format(name), random.Random(0)
    text = fmt.render(_page())
    for _ in range(150):
        n = len(text)
        edits = [(rng.randrange(n + 1), rng.choice(_NOISE)) for _ in range(rng.randrange(5))]
        _reads(fmt, _variants(text, rng.randrange(n + 1), rng.randrange(n + 1), rng.randrange(n + 1), edits))


@pytest.mark.parametrize("name", NAMES)
def test_parsers_read_any_output_hypothesis(name, tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(tmp_path)  # not .hypothesis/ in the checkout
    st = hypothesis.strategies
    fmt = get_format(name)
    text = fmt.render(_page())
    pos = st.integers(0, len(text))

    @hypothesis.settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(pos, pos, pos, st.lists(st.tuples(pos, st.sampled_from(_NOISE)), max_size=4))
    def check(cut, a, b, edits):
        _reads(fmt, _variants(text, cut, a, b, edits))

    check()


def test_parse_flags_what_it_cannot_read():
    for name in NAMES:
        fmt = get_format(name)
        result = fmt.parse("", 800, 1000)
        assert not result.page.blocks
    assert "missing </doctag>" in " ".join(get_format("doctags").parse("<doctag><text><loc_1>", 10, 10).repairs)
    assert "broken JSON" in " ".join(get_format("dots_json").parse('[{"bbox": [1, 2, 3, 4], "text": "ab', 10, 10).repairs)
    cut = get_format("dots_json").parse('[{"bbox": [1, 2, 3, 4], "category": "Text", "text": "ab', 10, 10)
    assert [b.content for b in cut.page.blocks] == ["ab"]


@pytest.mark.parametrize("name", [n for n in NAMES if get_format(n).layout_mode == "layout"])
def test_a_layout_pass_reads_back_and_never_raises(name):
    """A format's own layout pass (dots_json's `prompt_layout_only_en`, mineru's `Layout
    Detection:`): the page's regions without content, read back as they were written; cut,
    repeated or corrupted layouts give what they can, flagged, never an exception."""
    import random

    fmt, page, rng = get_format(name), _page(), random.Random(0)
    text = fmt.render_layout(page)
    assert all(b.content not in text for b in page.blocks)
    back = fmt.read_layout(text, page.width, page.height)
    assert back.clean and [(b.category, b.content) for b in back.page.blocks] == [(b.category, "") for b in page.blocks]
    for got, want in zip(back.page.blocks, page.blocks):
        assert all(abs(g - w) <= 1 for g, w in zip(got.bbox, want.bbox))
    flagged = 0
    for _ in range(100):
        n = len(text)
        edits = [(rng.randrange(n + 1), rng.choice(_NOISE)) for _ in range(rng.randrange(1, 5))]
        for variant in _variants(text, rng.randrange(n), rng.randrange(n + 1), rng.randrange(n + 1), edits):
            result = fmt.read_layout(variant, 800, 1000)
            assert all(b.content == "" for b in result.page.blocks)
            flagged += bool(result.repairs)
    assert flagged > 0 and fmt.read_layout("not a layout at all", 800, 1000).repairs


def test_markdown_reads_the_real_predictions(demo_pages):
    """The Markdown of a real model (../shared/omnidocbench_demo/predictions_md) read into pages."""
    from conftest import DEMO

    fmt = get_format("markdown")
    for gt in demo_pages:
        text = (DEMO / "predictions_md" / f"{gt.name}.md").read_text(encoding="utf-8")
        result = fmt.read(text, gt.width, gt.height, gt.image_path)
        assert result.page.blocks and {b.category for b in result.page.blocks} <= {"title", "text_block", "table",
                                                                                   "equation_isolated"}
        assert sum(len(b.content) for b in result.page.blocks) > 0.8 * len(text.replace("\n", "").replace("#", ""))


def test_evaluate_raw_outputs_in_each_format(demo_pages, tmp_path):
    """`evaluate format=NAME` on the ground truth written in each format scores its floor: what
    `format_floor` says, no page flagged; a garbled output is flagged, not fatal."""
    from treedec.commands.evaluate import evaluate_dir
    from treedec.results.evaluate import format_floor
    from conftest import DEMO

    for name in ("dots_json", "doctags"):
        fmt, folder = get_format(name), tmp_path / name
        folder.mkdir()
        for gt in demo_pages:
            (folder / f"{gt.name}.txt").write_text(fmt.render(gt), encoding="utf-8")
        (folder / f"{demo_pages[0].name}.txt").write_text(fmt.render(demo_pages[0])[:-40], encoding="utf-8")
        s = evaluate_dir(folder, DEMO / "OmniDocBench_demo.json", tmp_path / f"out_{name}", name)
        assert s["format"] == name and s["pages_flagged"] == 1
        floor = format_floor(demo_pages[1:], fmt)
        assert floor["pages_flagged"] == 0 and abs(floor["text_edit_vs_truth"]) < 1e-9
    with pytest.raises(UserError, match="unknown format 'dots'"):
        evaluate_dir(folder, DEMO / "OmniDocBench_demo.json", tmp_path / "x", "dots")


def test_cli_evaluate_format_markdown(tmp_path):
    import json
    from cli_helpers import treedec_here
    from conftest import DEMO

    if not DEMO.is_dir():
        pytest.skip("../shared/omnidocbench_demo is absent")
    r = treedec_here("evaluate", f"pred={DEMO / 'predictions_md'}", f"gt={DEMO / 'OmniDocBench_demo.json'}",
                     "format=markdown", f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert abs(s["text_edit"] - 0.4334536718) < 1e-9 and s["format"] == "markdown"
