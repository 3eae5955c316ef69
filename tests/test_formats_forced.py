"""The forced model in each output format (`model=forced model.format=NAME`): it returns the
ground truth as the format writes it, hsd speculates in the format's text, padoc forks in hpd's
protocol, and a strategy a format cannot serve is refused in one line. Issue 56's Goal on
small hand-made pages (the demo pages' forced decodes take minutes here): each format's
baseline (sequential; `crops` for mineru and paddleocr) at the ground truth's own text edit
with no page flagged, hsd the same pages at >= 1.5 accepted per step, padoc in hpd its
sequential's pages in half the median steps; `crops` runs in every format."""
import numpy as np
import pytest

from treedec.results.depth import page_depth
from treedec.results.quality import quality_figures, truth_text_edit
from treedec.errors import UserError
from treedec.formats import get_format
from treedec.models.forced import ForcedModel
from treedec.models.vlm import MODES
from treedec.runtimes.embedded import EmbeddedConfig, EmbeddedRuntime
from treedec.run.stages import run_strategy
from treedec.strategies.base import build_strategy

ONE_STAGE = ("treedec", "hpd", "markdown", "dots_json", "doctags")
TWO_STAGE = ("mineru", "paddleocr")


@pytest.fixture(scope="module")
def forced():
    """The forced 1m model in each format (`model.format`): the same weights, each asked with its format's prompt."""
    return {fmt: ForcedModel("1m", vision_tokens=4, fmt=fmt) for fmt in (*ONE_STAGE, *TWO_STAGE)}


@pytest.fixture(scope="module")
def samples():
    """Two small pages (a forced decode costs a step per token): a title, text with quotes and a
    line break (escaped in JSON), a table, a formula, a figure."""
    from PIL import Image

    from treedec.data.sample import Sample
    from treedec.page import Block, Page

    pages = [Page(200, 160, [Block("title", (10, 8, 150, 24), "Results", 0),
                             Block("text_block", (10, 30, 190, 70), 'We say "hi"\nand go.', 1),
                             Block("table", (10, 80, 190, 150), "<table><tr><td>a</td><td>1</td></tr></table>", 2)]),
             Page(160, 200, [Block("text_block", (10, 10, 150, 60), "Area of a circle:", 0),
                             Block("equation_isolated", (20, 70, 140, 90), "A=\\pi r^2", 1),
                             Block("figure", (20, 100, 140, 190), "", 2)])]
    for k, p in enumerate(pages):
        p.image_path = f"p{k}.png"  # the page's name, as a sample's
    return [Sample(p.name, p, Image.new("RGB", (p.width, p.height), "white")) for p in pages]


def columns():
    """A page of four paragraphs of about 60 characters each."""
    from PIL import Image

    from treedec.data.sample import Sample
    from treedec.page import Block, Page

    words = "the quick brown fox jumps over a lazy dog while it rains"
    page = Page(400, 120, [Block("text_block", (10 + 95 * k, 10, 95 + 95 * k, 110), f"{k}: {words}", k) for k in range(4)])
    page.image_path = "columns.png"
    return Sample(page.name, page, Image.new("RGB", (400, 120), "white"))


def run(vlm, name: str, fmt: str, samples, **options):
    if name in ("hsd", "padoc_hsd"):
        options = {"drafts": "oracle", **options}
    rt = EmbeddedRuntime(EmbeddedConfig(max_pages=len(samples), max_new_tokens=12000, max_branches=4096))
    strategy = build_strategy({"name": name, **options}, vlm[fmt].tokenizer, get_format(fmt))
    return run_strategy(rt, vlm[fmt], strategy, samples, progress=False, warmup=False, cold_drafts=False)


@pytest.fixture(scope="module")
def sequential(forced, samples):
    """Each format's baseline: sequential, `crops` in a two-stage format."""
    return {fmt: run(forced, "crops" if fmt in TWO_STAGE else "sequential", fmt, samples)
            for fmt in ONE_STAGE + TWO_STAGE}


@pytest.mark.parametrize("fmt", ONE_STAGE + TWO_STAGE)
def test_the_baseline_returns_the_ground_truth_in_each_format(forced, sequential, samples, fmt):
    res = sequential[fmt]
    f = get_format(fmt)
    for rec, s in zip(res.records, samples):
        assert not rec.flags, rec.flags
        assert rec.text == f.render(s.page), fmt  # the page as the format writes it, token for token
        asked = f.prompt("page") if f.has_prompt("page") else f.prompt("layout") if f.has_prompt("layout") else ""
        assert rec.kept["prompt"].endswith(asked), rec.kept["prompt"][-200:]  # asked in the format (its layout pass)
    quality, _ = quality_figures(res)
    assert quality["text_edit"] - truth_text_edit([s.page for s in samples], f) <= 0.01
    if fmt in TWO_STAGE:  # crops: its layout pass's steps (none with a detector) + its longest crop's, the oracle depth
        crops = build_strategy({"name": "crops"}, forced[fmt].tokenizer, f)
        assert [r.steps for r in res.records] == [page_depth(s.page, crops)["fork_depth"] for s in samples]


@pytest.mark.parametrize("fmt", ONE_STAGE + TWO_STAGE)
def test_hsd_in_each_format_gives_the_same_pages_with_drafts_accepted(forced, samples, sequential, fmt):
    res = run(forced, "hsd", fmt, samples)
    assert [r.text for r in res.records] == [r.text for r in sequential[fmt].records]
    assert all(not r.flags for r in res.records)
    accepted = sum(r.accepted for r in res.records)
    assert accepted > 0 and np.mean([r.accepted_per_step for r in res.records]) >= 1.5
    assert np.median([r.steps for r in res.records]) < np.median([r.steps for r in sequential[fmt].records])


@pytest.mark.parametrize("fmt", ("hpd", "markdown", "dots_json", "doctags"))
def test_crops_in_each_format_returns_the_ground_truth_as_the_format_writes_it(forced, samples, sequential, fmt):
    """`crops` in a one-pass format: hpd's layout stream and dots.ocr's layout-only prompt as their
    layout pass, the others' layout a detector's (the ground truth's regions under forcing), each
    region read from its crop: the page as the format writes it, the same as sequential's, its
    steps the layout's plus the longest crop's (fewer than sequential's)."""
    res = run(forced, "crops", fmt, samples)
    assert [r.text for r in res.records] == [r.text for r in sequential[fmt].records]
    assert all(not r.flags for r in res.records)
    for rec, s in zip(res.records, samples):
        reads = [g for g in rec.decoding.graph.streams[1:]]
        assert len(reads) == sum(b.category != "figure" for b in s.page.blocks)
        layout = rec.decoding.graph[0].generated  # hpd's and dots_json's layout pass; none where the layout is a detector's
        assert (layout > 0) == (fmt in ("hpd", "dots_json")) and rec.steps == layout + max(g.generated for g in reads)
        assert rec.steps == page_depth(s.page, build_strategy({"name": "crops"}, forced[fmt].tokenizer, get_format(fmt)))[
            "fork_depth"]  # the oracle depth
    assert np.median([r.steps for r in res.records]) < np.median([r.steps for r in sequential[fmt].records])


def test_crops_in_dots_json_runs_its_own_layout_pass(forced, samples, sequential):
    """dots.ocr's layout pass: asked with its layout-only prompt (`prompt_layout_only_en`), forced
    to the ground truth's regions as dots.ocr writes them (the JSON list without text), then each
    region read from its crop with `prompt_ocr`: the pages exactly, none flagged, in fewer steps
    than sequential."""
    from PIL import Image

    from treedec.formats.dots_json import LAYOUT_PROMPT, OCR_PROMPT

    f, vlm = get_format("dots_json"), forced["dots_json"]
    assert f.layout_mode == "layout" and LAYOUT_PROMPT.startswith("Please output the layout information from this PDF")
    res = run(forced, "crops", "dots_json", samples)
    quality, _ = quality_figures(res)
    assert quality["text_edit"] - truth_text_edit([s.page for s in samples], f) == 0
    for rec, s, seq in zip(res.records, samples, sequential["dots_json"].records):
        assert not rec.flags and rec.text == f.render(s.page) == seq.text
        assert rec.kept["prompt"].endswith(LAYOUT_PROMPT) and '"text"' not in rec.kept["raw_text"]
        assert rec.kept["output_ids"] == f.encode(vlm.tokenizer, f.render_layout(s.page))  # as dots.ocr writes it
        assert rec.decoding.graph[0].generated > 0 and rec.steps < seq.steps
    ids = vlm.prompt(Image.new("RGB", (64, 64)), "crop", "table").ids[4:]
    assert vlm.tokenizer.decode(ids) == OCR_PROMPT  # every region read with prompt_ocr


def test_padoc_in_hpd_equals_its_sequential_in_fewer_steps(forced, samples, sequential):
    res = run(forced, "padoc", "hpd", samples)
    assert [r.text for r in res.records] == [r.text for r in sequential["hpd"].records]
    assert np.median([r.steps for r in res.records]) < np.median([r.steps for r in sequential["hpd"].records])
    wide = [columns()]  # four paragraphs side by side: PaDoc's branches in parallel, the Goal's 2x fewer steps
    plain, tree = run(forced, "sequential", "hpd", wide), run(forced, "padoc", "hpd", wide)
    assert [r.text for r in tree.records] == [r.text for r in plain.records] and not tree.records[0].flags
    assert 2 * np.median([r.steps for r in tree.records]) <= np.median([r.steps for r in plain.records])
    hsd = run(forced, "padoc_hsd", "hpd", samples)
    assert [r.text for r in hsd.records] == [r.text for r in res.records] and sum(r.accepted for r in hsd.records) > 0


@pytest.mark.parametrize("fmt", (*ONE_STAGE, "mineru"))
def test_the_prompt_is_the_formats_prompt_text_in_the_forced_tokenizer(forced, fmt):
    from PIL import Image

    vlm, f = forced[fmt], get_format(fmt)
    tok, image = vlm.tokenizer, Image.new("RGB", (64, 64))
    has = {"flat": "page" in f.prompts, "tree": "tree" in f.prompts, "crop": bool(f.crop_prompts)}
    asked = [m for m, yes in has.items() if yes]
    assert asked
    for mode in asked:
        ids = vlm.prompt(image, mode).ids
        assert ids == [tok.image_id] * 4 + tok.encode(f.prompt(mode)), (fmt, mode)
        assert tok.decode(ids[4:]) == f.prompt(mode)
        if fmt != "treedec":  # a sentence, not treedec's mode token
            assert len(ids) > 4 + 1 and tok.vocab[MODES[mode]] not in ids


def test_without_a_format_the_prompt_is_treedecs_mode_token(forced):
    from PIL import Image

    vlm = ForcedModel("1m", vision_tokens=4)
    tok, image = vlm.tokenizer, Image.new("RGB", (64, 64))
    for mode in ("flat", "tree", "crop"):
        assert vlm.prompt(image, mode).ids == [tok.image_id] * 4 + [tok.vocab[MODES[mode]]]


def test_a_mode_the_format_has_no_prompt_for_keeps_treedecs_mode_token(forced):
    from PIL import Image

    tok, image = forced["markdown"].tokenizer, Image.new("RGB", (64, 64))
    assert forced["markdown"].prompt(image, "crop").ids[4:] == [tok.vocab["<|crop|>"]]
    assert forced["hpd"].prompt(image, "tree_rows").ids[4:] == [tok.vocab["<|tree_rows|>"]]
    assert forced["treedec"].prompt(image, "layout").ids[4:] == [tok.vocab["<|tree|>"]]  # its tree mode's
    with pytest.raises(UserError, match="unknown prompt mode"):
        forced["hpd"].prompt(image, "nosuch")
    with pytest.raises(UserError, match="unknown format 'nosuch'"):
        ForcedModel("1m", vision_tokens=4, fmt="nosuch")


def test_a_strategy_a_format_cannot_serve_is_refused_in_one_line(forced):
    tok = forced["treedec"].tokenizer
    with pytest.raises(UserError, match=r"strategy=padoc needs a fork protocol.*formats that serve it: hpd, treedec"):
        build_strategy({"name": "padoc"}, tok, get_format("markdown"))
    with pytest.raises(UserError, match="use strategy=crops"):
        build_strategy({"name": "sequential"}, tok, get_format("mineru"))
    for name in ("padoc", "table_rows", "padoc_hsd"):
        build_strategy({"name": name}, tok, get_format("hpd"))  # served
    for fmt in TWO_STAGE:  # crops and hsd (crops speculated) served; what hsd cannot speculate there refused
        assert build_strategy({"name": "hsd"}, tok, get_format(fmt)).after is not None
        with pytest.raises(UserError, match=r"speculates its crop reads .* strategy.base=sequential") as e:
            build_strategy({"name": "hsd", "mtp": True}, tok, get_format(fmt))
        assert "\n" not in str(e.value)
        with pytest.raises(UserError, match="needs a fork protocol"):
            build_strategy({"name": "padoc_hsd"}, tok, get_format(fmt))


def test_cli_refuses_a_fork_strategy_in_markdown(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    r = subprocess.run([sys.executable, "-m", "treedec", "run", "model=forced", "model.size=1m", "data=synth",
                        "data.pages=1", "strategy=padoc", "model.format=markdown", f"out={tmp_path}"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-2000:]
    assert "strategy=padoc needs a fork protocol" in r.stderr and "hpd, treedec" in r.stderr
