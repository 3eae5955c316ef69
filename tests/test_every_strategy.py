"""Every strategy on every model kind (issue 23, items 5 and 6): the tiny random Idefics3
(`VLM.tiny`) and a tiny random Qwen3-VL checkpoint (loaded by `load_vlm`, picked by its
`model_type`) each decode two synthetic pages with every registered strategy through the
runtime, end to end (stage 1, drafts, records). Both are `PageModel`s; only treedec's own VLM
is a `ServedPageModel`.

Every speculative strategy and composition (issue 33, item 5) is lossless on both kinds, and
not vacuously (`test_speculation_is_lossless_on_every_model_kind`): its pages equal its base
strategy's token id for token id, stream by stream, and drafts were proposed, accepted and
rejected (drafted > accepted > 0). A random model writes no layout of its own, so there the
structure is forced (`ForcedTree`, `ForcedRows`: the model still picks every letter), which
makes the tree forms fork; HSD's drafts are the plain run's own page corrupted, MTP's head a
real head fitted briefly on the model's own output on other pages (`lossless_helpers`)."""
import pytest
import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.models.page_model import PageModel, ServedPageModel
from treedec.models.vlm import MODES, VLM, VLMSpec
from treedec.run.stages import drafts_ahead, run_strategy
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import STRATEGIES, build_strategy

from engine_helpers import ForcedRows, ForcedTree
from lossless_helpers import VerdictSpy, assert_lossless, decode, fitted_head, fitted_placeholders, own_drafts
from test_qwen3_vl import save_tiny_qwen3_vl

SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)
PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
ECFG = EngineConfig(max_new_tokens=24, max_pages=2)
FORCED = EngineConfig(max_new_tokens=128)  # room for a forced page: 3 blocks of layout and content in one stream
BASES = ("sequential", "padoc", "table_rows", "table_cells")  # the fork strategies speculated on below
SPECULATIVE = {"hsd": "sequential", "padoc_hsd": "padoc", "mtp": "sequential", "hpd": "padoc"}
BOXES = ["[62,62,938,312]", "[62,375,938,625]", "[62,688,938,938]"]  # forced layouts: the boxes they write
# (strategy config, its base): every speculative strategy and composition; MTP's head and HSD's drafts are added
LOSSLESS = [({"name": "hsd"}, "sequential"), ({"name": "padoc_hsd"}, "padoc"),
            ({"name": "hsd", "base": "table_rows"}, "table_rows"),
            ({"name": "mtp"}, "sequential"), ({"name": "hpd"}, "padoc"), ({"name": "hpd", "top": 2}, "padoc"),
            ({"name": "mtp", "base": "table_rows"}, "table_rows"),
            ({"name": "hsd", "base": "table_cells"}, "table_cells"), ({"name": "mtp", "base": "table_cells"}, "table_cells"),
            ({"name": "hsd", "mtp": True}, "sequential"), ({"name": "padoc_hsd", "mtp": True}, "padoc")]


@pytest.fixture(scope="module", params=["idefics3", "qwen3_vl"])
def model(request, tmp_path_factory):
    """(kind, model)."""
    torch.set_num_threads(1)
    if request.param == "idefics3":
        return request.param, VLM.tiny(SPEC, seed=5)
    path = save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl"), modes=tuple(MODES.values()))
    return request.param, load_vlm(OmegaConf.create({"name": "qwen3_vl", "path": str(path)}))


def forced(vlm, base: str, samples) -> list:
    """The logits processor making the random model write a page in `base`'s form: three text
    blocks (flat or forked), or two tables of 2 and 3 rows, each row (table_cells: each of its
    two cells) its own branch."""
    strategy = build_strategy({"name": base}, vlm.tokenizer)
    n = len(vlm.prompt(samples[0].image, strategy.mode).ids)
    if base in ("table_rows", "table_cells"):
        return [ForcedRows(n, [2, 3], 5, boxes=BOXES[:2], tok=vlm.tokenizer, cells=2 * (base == "table_cells"))]
    return [ForcedTree(n, 3, [14, 9, 11], fork=base != "sequential", boxes=BOXES, tok=vlm.tokenizer)]


@pytest.fixture(scope="module")
def head(model, tmp_path_factory):
    """An MTP head for the model, fitted on its own forced output (every base's form) on pages
    other than `samples`'."""
    _, vlm = model
    other = [generate_page(s, PAGE) for s in (2, 3)]
    folder = tmp_path_factory.mktemp("mtp")
    return fitted_head(vlm, {b: (build_strategy({"name": b}, vlm.tokenizer), forced(vlm, b, other))
                             for b in BASES}, other, FORCED, folder)


@pytest.fixture(scope="module")
def placeholders(model, tmp_path_factory):
    """PTP placeholders for treedec's own VLM, fitted on its own forced output (flat form) on
    pages other than `samples`'; None for a Qwen3-VL checkpoint (PTP refuses it)."""
    kind, vlm = model
    if kind != "idefics3":
        return None
    other = [generate_page(s, PAGE) for s in (2, 3)]
    runs = decode(vlm, build_strategy({"name": "sequential"}, vlm.tokenizer), other, FORCED,
                  forced(vlm, "sequential", other))
    return fitted_placeholders(vlm, runs, other, tmp_path_factory.mktemp("ptp"), steps=100)


@pytest.fixture(scope="module")
def samples():
    return [generate_page(s, PAGE) for s in range(2)]


@pytest.fixture(scope="module")
def plain_runs(model, samples):
    """Each base strategy's forced pages, no drafts: what the speculative ones must reproduce."""
    _, vlm = model
    return {b: decode(vlm, build_strategy({"name": b}, vlm.tokenizer), samples, FORCED, forced(vlm, b, samples))
            for b in BASES}


def options(cfg: dict, head, placeholders=None) -> dict:
    """HSD drafts from the samples' pages (`drafts=oracle`); MTP with the fitted head; PTP with
    the fitted placeholders."""
    extra = {"drafts": "oracle"} if cfg["name"] in ("hsd", "padoc_hsd") else {}
    if cfg["name"] in ("mtp", "hpd") or cfg.get("mtp"):
        extra.update(head=head, k=3)
    if cfg["name"] == "ptp":
        extra.update(placeholders=placeholders, k=3)
    return {**cfg, **extra}


def test_models_are_page_models_and_only_treedecs_own_is_served(model):
    kind, vlm = model
    assert isinstance(vlm, PageModel)
    assert isinstance(vlm, ServedPageModel) == (kind == "idefics3")
    assert not isinstance(vlm, VLM) or kind == "idefics3"  # no subclass with methods that raise
    grid = vlm.page_grid(generate_page(0, PAGE).image)
    assert grid == (16 if kind == "idefics3" else None)


@pytest.mark.parametrize("name", sorted(STRATEGIES.names()))
def test_every_strategy_runs_on_every_model_kind(model, samples, head, placeholders, name):
    """Through the runtime, end to end: every page recorded, decoded; HSD's stage 1 read its
    crops, MTP proposed a chain at every step of every stream (lossless: the test below and
    tests/test_ptp.py); PTP refuses a Qwen3-VL checkpoint in one line."""
    kind, vlm = model
    strategy = build_strategy(options({"name": name}, head, placeholders), vlm.tokenizer)
    if name == "ptp" and kind == "qwen3_vl":
        with pytest.raises(UserError, match="Idefics3") as e:
            run_strategy(EmbeddedRuntime(ECFG), vlm, strategy, samples, progress=False)
        assert "\n" not in str(e.value)
        return
    res = run_strategy(EmbeddedRuntime(ECFG), vlm, strategy, samples, progress=False)
    assert [r.name for r in res.records] == [s.name for s in samples]
    assert all(r.steps > 0 and r.generated > 0 for r in res.records), [r.flags for r in res.records]
    if name in ("hsd", "padoc_hsd"):
        assert all(r.extra["stage1_crops"] > 0 and r.extra["stage1_steps"] > 0 for r in res.records)
    if name in ("mtp", "hpd"):
        assert sum(r.drafted for r in res.records) >= sum(r.steps - 1 for r in res.records) > 0


@pytest.mark.parametrize("cfg, base", LOSSLESS, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}={x}" for k, x in v.items()))
def test_speculation_is_lossless_on_every_model_kind(model, samples, head, plain_runs, cfg, base):
    """Token ids equal the base strategy's, stream by stream, drafted > accepted > 0. HSD's
    drafts: the base run's own page, every 4th character changed; its stage 1 reads their
    crops (unforced). A composition with `mtp=true`: MTP drafts where the page drafts propose
    nothing, so one region is left out of the drafts, and MTP's own drafts must land too."""
    kind, vlm = model
    plain = plain_runs[base]
    strategy = build_strategy(options(cfg, head), vlm.tokenizer)
    assert strategy.name == cfg["name"] and strategy.mode == build_strategy({"name": base}, vlm.tokenizer).mode
    hsd = cfg["name"] in ("hsd", "padoc_hsd")
    pages = own_drafts(samples, plain, build_strategy({"name": base}, vlm.tokenizer)) if hsd else samples
    if cfg.get("mtp"):
        for s in pages:
            s.page.blocks = s.page.blocks[:-1]  # its region drafted by nothing but MTP (and the other regions)
    # made for a run: drafting, stage 1 on the crops, the head loaded
    strategy, before = drafts_ahead(EmbeddedRuntime(ECFG), vlm, strategy, pages)
    spy = VerdictSpy(strategy.drafter.drafters[1]) if cfg.get("mtp") else None  # the run's MTP source
    if hsd:
        assert all(before[s.name]["stage1_crops"] > 0 for s in samples)
    spec = decode(vlm, strategy, pages, FORCED, forced(vlm, base, samples))
    assert_lossless(plain, spec)
    if spy is not None:
        assert spy.accepted and sum(spy.accepted) > 0, spy.accepted


def test_vllm_refuses_a_model_it_cannot_serve_in_one_line(model, samples):
    kind, vlm = model
    if kind != "qwen3_vl":
        pytest.skip("treedec's own VLM is served (tests/test_vllm_backend.py)")
    from treedec.runtimes.vllm.runtime import VLLMRuntime

    with pytest.raises(UserError, match="runtime=embedded") as e:
        VLLMRuntime().run(vlm, STRATEGIES.get("padoc")(vlm.tokenizer), samples, progress=False)
    assert "\n" not in str(e.value)
