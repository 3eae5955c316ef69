"""Forced decoding (`model=forced`, treedec/models/forced.py, treedec/engine/forced.py): every
strategy returns the ground truth exactly, in its own target form, on synthetic pages and on
the real demo pages; sizes are what they say; mtp/hpd are refused in one line."""
import os

import pytest

from treedec.results.quality import quality_figures, truth_text_edit
from treedec.data import open_dataset
from treedec.engine.draft import DraftTree
from treedec.engine.forced import ForcedChoice
from treedec.errors import UserError
from treedec.results.evaluate import evaluate_pages
from treedec.models.forced import SIZES, ForcedModel, decoder_params
from treedec.runtimes.embedded import EmbeddedConfig, EmbeddedRuntime
from treedec.formats.contract import page_to_flat, parse_flat
from treedec.strategies.base import build_strategy
from treedec.strategies.padoc import tree_target

from conftest import DEMO, run_forced as run

# every strategy but mtp/hpd (refused: no trained head); HSD's drafts from the ground truth (fast: the pipeline OCR
# reads a demo page in about a minute here; with its drafts the pages are the same, acceptance being exact)
STRATEGIES = ("sequential", "padoc", "table_rows", "table_cells", "crops", "hsd", "padoc_hsd")
SYNTH = {"name": "synth", "pages": 3, "seed": 0, "page": {"width": 256, "height": 256, "regions": [2, 4]}}


@pytest.fixture(scope="module")
def forced():
    return ForcedModel("1m", vision_tokens=16)


def test_sizes_are_their_names():
    for name, shape in SIZES.items():
        want = float(name[:-1]) * (1e6 if name.endswith("m") else 1e9)
        assert 0.8 * want <= shape.params <= 1.2 * want, (name, shape.params)
    assert decoder_params(ForcedModel("1m")) == SIZES["1m"].params  # the count is the built model's


def test_forced_choice_walks_the_target_and_its_drafts(forced):
    tok = forced.tokenizer
    page = next(iter(open_dataset({"name": "synth", "pages": 1}, render=False))).page
    target = tree_target(page, tok, [7, 8])
    oracle = ForcedChoice(target, tok.eos_id)
    layout = target[0].tokens[2:]
    g = type(target)()
    g.root([7, 8])
    g.append(0, layout[:3])
    # after the first three layout tokens: the fourth; a draft [4th, wrong, 5th] is walked down its own path
    wrong = layout[4] + 1 if layout[4] + 1 != layout[5] else layout[4] + 2
    got = oracle.choose(g, 0, DraftTree([layout[3], wrong, layout[4]], [-1, 0, 0]))
    assert got == [layout[3], layout[4], tok.eos_id, layout[5]]


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_strategy_returns_the_ground_truth_on_synthetic_pages(forced, name):
    samples = list(open_dataset(SYNTH))
    assert {"table", "equation_isolated", "text_block"} <= {b.category for s in samples for b in s.page.blocks}
    res = run(forced, name, samples)
    for rec, s in zip(res.records, samples):
        assert not rec.flags, rec.flags
        assert rec.text == page_to_flat(s.page), name
    if name == "padoc_hsd":  # drafts accepted where they equal the forced tokens
        assert sum(r.accepted for r in res.records) > 0


def test_without_forcing_the_same_model_writes_garbage(forced):
    """The check above can fail: the same random weights, unforced, do not write the page."""
    from treedec.models.adapter import CausalLMAdapter

    samples = list(open_dataset({**SYNTH, "pages": 1}))
    unforced = ForcedModel("1m", vision_tokens=16)
    unforced.adapter = lambda: CausalLMAdapter(unforced.model)
    rt = EmbeddedRuntime(EmbeddedConfig(max_pages=1, max_new_tokens=64))
    rec = rt.run(unforced, build_strategy({"name": "sequential"}, unforced.tokenizer), samples, progress=False,
                 warmup=False).records[0]
    assert rec.text != page_to_flat(samples[0].page)


def test_mtp_is_refused_in_one_line(forced):
    samples = list(open_dataset({**SYNTH, "pages": 1}))
    with pytest.raises(UserError, match="no MTP head"):
        run(forced, "hpd", samples)


def test_a_page_without_ground_truth_is_a_user_error(forced):
    from treedec.data.sample import Sample

    s = next(iter(open_dataset({**SYNTH, "pages": 1})))
    with pytest.raises(UserError, match="ground truth"):
        run(forced, "sequential", [Sample("bare", None, s.image)])


@pytest.fixture(scope="module")
def demo():
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    return list(open_dataset({"name": "omnidocbench", "root": str(DEMO)}))


def test_demo_page_sizes_are_their_images(demo):
    """page_info's width and height are swapped on 6 of the 12 demo pages; the boxes fit the image."""
    for s in demo:
        assert (s.page.width, s.page.height) == s.image.size


def short_pages(demo: list, limit: int = 2000) -> list:
    """The demo pages of at most `limit` tokens flat (4 of 12: titles, text, figures, two
    tables, headers), every page with TREEDEC_DEMO_PAGES=all: a page's forced decode costs its
    tokens in steps (sequential on all 12, up to 12.6 k steps, takes minutes here), and the
    longer pages add length, not target forms."""
    if os.environ.get("TREEDEC_DEMO_PAGES") == "all":
        return demo
    return [s for s in demo if len(page_to_flat(s.page)) <= limit]


def test_the_ground_truth_itself_scores_above_zero_on_the_demo_pages(demo):
    """The floor of a forced run's text edit (summary.json's `text_edit_truth`): the ground truth
    as a prediction scores 0 on every demo page but 2, so the Goal's text edit is checked against
    it (`text_edit_vs_truth`), not as an absolute."""
    per_page = {s.name: truth_text_edit([s.page]) for s in demo}
    above = sorted(n for n, v in per_page.items() if v > 0)
    assert len(above) == 2 and max(per_page.values()) > 0.2, per_page
    assert truth_text_edit([s.page for s in demo]) > 0.001


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_strategy_returns_the_ground_truth_on_the_demo_pages(forced, demo, name):
    """Text, tables and reading order as the flat serialization writes the ground truth: its
    quality figures are those of the ground truth parsed back from its own flat form (exact on
    10 of the 12 pages; on 2, headers without a reading order get one in the flat form)."""
    demo = short_pages(demo)
    assert len(demo) >= 4 and any(b.category == "table" for s in demo for b in s.page.blocks)
    res = run(forced, name, demo)
    assert not [r.flags for r in res.records if r.flags]
    for rec, s in zip(res.records, demo):
        assert rec.text == page_to_flat(s.page), (name, s.name)
    got, _ = quality_figures(res)
    truth = evaluate_pages({s.name: parse_flat(page_to_flat(s.page), s.page.width, s.page.height).page for s in demo},
                           [s.page for s in demo])
    for key in ("text_edit", "table_teds", "reading_order_edit", "layout_f1"):
        assert got[key] == pytest.approx(truth[key]), key
    assert got["text_edit"] - truth_text_edit([s.page for s in demo]) == pytest.approx(0)  # summary's text_edit_vs_truth
    assert got["table_teds"] == 1 and got["reading_order_edit"] == 0 and got["layout_f1"] == 1
