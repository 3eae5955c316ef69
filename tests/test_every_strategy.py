"""Every strategy on every model kind (issue 23, items 5 and 6): the tiny random Idefics3
(`VLM.tiny`) and a tiny random Qwen3-VL checkpoint (loaded by `load_vlm`, picked by its
`model_type`) each decode two synthetic pages with every registered strategy, plus
speculation wrapped around a nested fork strategy by name (`hsd` / `mtp` with
`base=table_rows`). Both are `PageModel`s; only treedec's own VLM is a `ServedPageModel`.

The speculative strategies must give their base strategy's pages token for token: HSD's
drafts are the base run's own pages (`drafts=oracle` from them), partly accepted, partly
rejected (the parser's repairs and the stage-1 crops make them differ); MTP's drafts come
from a random head saved beside nothing (`strategy.head=DIR`), bound to the model by
`base_hash`."""
import copy

import pytest
import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.models.mtp_head import MTPConfig, MTPHead, base_hash, save_head
from treedec.models.page_model import PageModel, ServedPageModel
from treedec.models.vlm import MODES, VLM, VLMSpec
from treedec.page import Block, Page
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import STRATEGIES, build_strategy

from test_qwen3_vl import save_tiny_qwen3_vl

SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)
PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
ECFG = EngineConfig(max_new_tokens=24, max_pages=2)
SPECULATIVE = {"hsd": "sequential", "padoc_hsd": "padoc", "mtp": "sequential", "hpd": "padoc"}
WRAPPED = [("hsd", "table_rows"), ("mtp", "table_rows")]  # speculation around a nested fork rule, by name


@pytest.fixture(scope="module", params=["idefics3", "qwen3_vl"])
def model(request, tmp_path_factory):
    """(kind, model, MTP head folder for it)."""
    torch.set_num_threads(1)
    if request.param == "idefics3":
        vlm = VLM.tiny(SPEC, seed=5)
    else:
        vlm = load_vlm(OmegaConf.create({"name": "qwen3_vl",
                                         "path": str(save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl"),
                                                                        modes=tuple(MODES.values())))}))
    hidden = vlm.model.config.text_config.hidden_size
    torch.manual_seed(0)
    head = save_head(MTPHead(MTPConfig(hidden=hidden, k=2)), tmp_path_factory.mktemp("mtp"), base_hash(vlm.model))
    return request.param, vlm, head


@pytest.fixture(scope="module")
def samples():
    return [generate_page(s, PAGE) for s in range(2)]


@pytest.fixture(scope="module")
def base_runs(model, samples):
    """Every fork strategy's pages (no drafts): what the speculative ones must reproduce."""
    _, vlm, _ = model
    return {name: EmbeddedRuntime(ECFG).run(vlm, build_strategy({"name": name}, vlm.tokenizer), samples,
                                            progress=False) for name in ("sequential", "padoc", "table_rows")}


def options(name: str, head) -> dict:
    if name in ("hsd", "padoc_hsd"):
        return {"drafts": "oracle"}
    if name in ("mtp", "hpd"):
        return {"head": str(head), "k": 2}
    return {}


def own_drafts(samples, base):
    """The samples with a draft (`drafts=oracle`: the sample's page) made of the base run's own
    output: one region over the page holding its raw text (a random model writes no page the
    parser keeps, but it repeats itself, so its text drafts it in part)."""
    out = [copy.copy(s) for s in samples]
    for s, rec in zip(out, base.records):
        s.page = Page(rec.page.width, rec.page.height, [Block("text_block", (0.0, 0.0, rec.page.width, rec.page.height),
                                                              rec.text)])
    return out


def check_drafts(name: str, mode: str, res) -> None:
    """The drafts reached the engine. HSD: every page went through stage 1 (its crops decoded);
    in the flat form the base run's own text drafts it, some tokens accepted and some
    rejected. In a tree form a random model's layout stream writes no layout for the draft's
    layout to match, so nothing is proposed there (trained models: tests/test_hsd.py,
    tests/test_vllm_drafts.py). MTP: a chain proposed at every step of every stream
    (a random head's are rejected almost always)."""
    drafted, accepted = sum(r.drafted for r in res.records), sum(r.accepted for r in res.records)
    if name in ("hsd", "padoc_hsd"):
        assert all(r.extra["stage1_crops"] > 0 and r.extra["stage1_steps"] > 0 for r in res.records)
        if mode == "flat":
            assert 0 < accepted < drafted, (accepted, drafted)
    else:
        assert drafted >= sum(r.steps - 1 for r in res.records) > 0, drafted


def test_models_are_page_models_and_only_treedecs_own_is_served(model):
    kind, vlm, _ = model
    assert isinstance(vlm, PageModel)
    assert isinstance(vlm, ServedPageModel) == (kind == "idefics3")
    assert not isinstance(vlm, VLM) or kind == "idefics3"  # no subclass with methods that raise
    grid = vlm.page_grid(generate_page(0, PAGE).image)
    assert grid == (16 if kind == "idefics3" else None)


@pytest.mark.parametrize("name", sorted(STRATEGIES.names()))
def test_every_strategy_runs_on_every_model_kind(model, samples, base_runs, name):
    kind, vlm, head = model
    strategy = build_strategy({"name": name, **options(name, head)}, vlm.tokenizer)
    base = SPECULATIVE.get(name)
    pages = own_drafts(samples, base_runs[base]) if name in ("hsd", "padoc_hsd") else samples
    res = EmbeddedRuntime(ECFG).run(vlm, strategy, pages, progress=False)
    assert [r.name for r in res.records] == [s.name for s in samples]
    assert all(r.steps > 0 and r.generated > 0 for r in res.records), [r.flags for r in res.records]
    if base is None:
        return
    for a, b in zip(base_runs[base].records, res.records):
        assert b.text == a.text, (kind, name, b.name)  # token for token (treedec's tokens decode one to one)
    check_drafts(name, strategy.mode, res)


@pytest.mark.parametrize("name, base", WRAPPED)
def test_speculation_wraps_a_fork_strategy_by_name(model, samples, base_runs, name, base):
    """`strategy=hsd strategy.base=table_rows`: the nested fork rule's prompt mode and forks,
    drafted; its pages are the fork strategy's own."""
    kind, vlm, head = model
    strategy = build_strategy({"name": name, "base": base, **options(name, head)}, vlm.tokenizer)
    assert strategy.mode == "tree_rows" and strategy.name == name
    pages = own_drafts(samples, base_runs[base]) if name == "hsd" else samples
    res = EmbeddedRuntime(ECFG).run(vlm, strategy, pages, progress=False)
    for a, b in zip(base_runs[base].records, res.records):
        assert b.text == a.text, (kind, name, b.name)
    check_drafts(name, strategy.mode, res)


def test_vllm_refuses_a_model_it_cannot_serve_in_one_line(model, samples):
    kind, vlm, _ = model
    if kind != "qwen3_vl":
        pytest.skip("treedec's own VLM is served (tests/test_vllm_backend.py)")
    from treedec.runtimes.vllm import VLLMRuntime

    with pytest.raises(UserError, match="runtime=embedded") as e:
        VLLMRuntime().run(vlm, STRATEGIES.get("padoc")(vlm.tokenizer), samples, progress=False)
    assert "\n" not in str(e.value)
