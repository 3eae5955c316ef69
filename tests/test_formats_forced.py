"""The forced model in each output format (`model=forced model.format=NAME`): it returns the
ground truth as the format writes it, hsd speculates in the format's text, padoc forks in hpd's
protocol, and a strategy a format cannot serve is refused in one line."""
import numpy as np
import pytest

from treedec.commands.run import quality_figures, truth_text_edit
from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.formats import get_format
from treedec.models.forced import ForcedModel
from treedec.runtimes.embedded import EmbeddedConfig, EmbeddedRuntime
from treedec.stages import run_strategy
from treedec.strategies.base import build_strategy

ONE_STAGE = ("treedec", "hpd", "markdown", "dots_json", "doctags")
SYNTH = {"name": "synth", "pages": 3, "seed": 0, "page": {"width": 256, "height": 256, "regions": [2, 4]}}


@pytest.fixture(scope="module")
def forced():
    return ForcedModel("1m", vision_tokens=16)


@pytest.fixture(scope="module")
def samples():
    return list(open_dataset(SYNTH))


def run(vlm, name: str, fmt: str, samples, **options):
    if name in ("hsd", "padoc_hsd"):
        options = {"drafts": "oracle", **options}
    rt = EmbeddedRuntime(EmbeddedConfig(max_pages=len(samples), max_new_tokens=12000, max_branches=4096))
    strategy = build_strategy({"name": name, **options}, vlm.tokenizer, get_format(fmt))
    return run_strategy(rt, vlm, strategy, samples, progress=False, warmup=False, cold_drafts=False)


@pytest.fixture(scope="module")
def sequential(forced, samples):
    return {fmt: run(forced, "sequential", fmt, samples) for fmt in ONE_STAGE}


@pytest.mark.parametrize("fmt", ONE_STAGE)
def test_the_baseline_returns_the_ground_truth_in_each_format(sequential, samples, fmt):
    res = sequential[fmt]
    f = get_format(fmt)
    for rec, s in zip(res.records, samples):
        assert not rec.flags, rec.flags
        assert rec.text == f.render(s.page), fmt  # the page as the format writes it, token for token
    quality, _ = quality_figures(res)
    assert quality["text_edit"] - truth_text_edit([s.page for s in samples], f) <= 0.01


@pytest.mark.parametrize("fmt", ONE_STAGE)
def test_hsd_in_each_format_gives_the_same_pages_with_drafts_accepted(forced, samples, sequential, fmt):
    res = run(forced, "hsd", fmt, samples)
    assert [r.text for r in res.records] == [r.text for r in sequential[fmt].records]
    assert all(not r.flags for r in res.records)
    accepted = sum(r.accepted for r in res.records)
    assert accepted > 0
    assert np.median([r.steps for r in res.records]) < np.median([r.steps for r in sequential[fmt].records])


def test_padoc_in_hpd_equals_its_sequential_in_fewer_steps(forced, samples, sequential):
    res = run(forced, "padoc", "hpd", samples)
    assert [r.text for r in res.records] == [r.text for r in sequential["hpd"].records]
    assert np.median([r.steps for r in res.records]) < np.median([r.steps for r in sequential["hpd"].records])
    hsd = run(forced, "padoc_hsd", "hpd", samples)
    assert [r.text for r in hsd.records] == [r.text for r in res.records] and sum(r.accepted for r in hsd.records) > 0


def test_a_strategy_a_format_cannot_serve_is_refused_in_one_line(forced):
    tok = forced.tokenizer
    with pytest.raises(UserError, match=r"strategy=padoc needs a fork protocol.*formats that serve it: hpd, treedec"):
        build_strategy({"name": "padoc"}, tok, get_format("markdown"))
    with pytest.raises(UserError, match="use strategy=crops"):
        build_strategy({"name": "sequential"}, tok, get_format("mineru"))
    for name in ("padoc", "table_rows", "padoc_hsd"):
        build_strategy({"name": name}, tok, get_format("hpd"))  # served
