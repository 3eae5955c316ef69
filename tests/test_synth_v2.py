"""Page presets: v2 pages calibrated to the real OmniDocBench demo pages, today's settings
under their own names, and `depth` and `run` reading the same pages by default."""
import json

import pytest

from conftest import DEMO, load_script
from treedec.data import open_dataset
from treedec.data.synth import PRESETS, SynthConfig, generate_page, synth_config
from treedec.errors import UserError
from treedec.models.vlm import SHIPPED, vlm_tokenizer
from treedec.results.depth import page_stats, summarize
from treedec.strategies.base import STRATEGIES

# The real demo pages' quartiles [q1, median, q3], as measured by
# `python experiments/page_stats.py` (12 pages of ../shared/omnidocbench_demo, padoc oracle,
# treedec's tokenizer); used only where ../shared is absent.
REAL = {"regions": [9.75, 15.0, 23.25], "reduction": [0.4716, 0.6478, 0.7291], "tokens_text": [60.5, 126.0, 179.5],
        "tokens_title": [5.25, 11.5, 16.0], "tokens_table": [261.0, 393.0, 545.5], "tokens_caption": [5.0, 8.5, 14.75],
        "tokens_furniture": [3.0, 5.0, 20.0]}
KINDS = ("text", "title", "table", "caption", "furniture")  # the kinds the demo pages have (no display formulas)


def _stats(pages):
    padoc = STRATEGIES.get("padoc")(vlm_tokenizer())
    return summarize([page_stats(p, padoc) for p in pages])


@pytest.fixture(scope="module")
def real():
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        return REAL
    from treedec.io import load_omnidocbench

    return _stats(load_omnidocbench(DEMO / "OmniDocBench_demo.json"))


def _synth(preset, n=80):
    cfg = synth_config({"preset": preset})
    return _stats([generate_page(1_000_000 + i, cfg, render=False).page for i in range(n)])


def test_v2_pages_match_the_real_pages(real):
    v2 = _synth("v2")
    assert abs(v2["reduction"][1] - real["reduction"][1]) <= 0.05, (v2["reduction"], real["reduction"])
    assert real["regions"][0] <= v2["regions"][1] <= real["regions"][2], (v2["regions"], real["regions"])
    for kind in KINDS:
        key = f"tokens_{kind}"
        assert real[key][0] <= v2[key][1] <= real[key][2], (key, v2[key], real[key])


def test_model_v2_pages_keep_regions_and_reduction_with_shorter_text(real):
    m = _synth("v2_model")
    assert abs(m["reduction"][1] - real["reduction"][1]) <= 0.05, (m["reduction"], real["reduction"])
    assert real["regions"][0] <= m["regions"][1] <= real["regions"][2]
    # text shorter than real, but text blocks still an order of magnitude longer than titles
    assert m["tokens_text"][1] >= 4 * m["tokens_title"][1]


def test_todays_settings_keep_their_names():
    assert synth_config({"preset": "base"}) == SynthConfig(preset="base")
    shipped = json.loads((SHIPPED / "treedec.json").read_text())["pages"]
    v1 = synth_config({"preset": "v1"})
    for key, value in shipped.items():
        got = getattr(v1, key)
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    # a preset's knobs give way to the ones set beside it; without a preset the base applies
    assert synth_config({"preset": "v2", "regions": (1, 2)}).regions == (1, 2)
    assert synth_config({}, base={"width": 256, "height": 256}).width == 256
    assert synth_config({"preset": "v2"}, base={"width": 256}).width == PRESETS["v2"]["width"]


def test_unknown_preset_is_a_user_error():
    with pytest.raises(UserError, match="unknown preset 'v9'"):
        open_dataset({"name": "synth", "pages": 1, "page": {"preset": "v9"}})


def _compose(command, overrides=()):
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        return compose(config_name=command, overrides=list(overrides))


@pytest.mark.parametrize("overrides", [(), ("data.page.preset=v2",), ("data.page.regions=[2,3]",)])
def test_depth_and_run_read_the_same_pages_by_default(overrides):
    from treedec.commands.depth import depth_dataset
    from treedec.models.loader import load_vlm

    depth_cfg, run_cfg = _compose("depth", overrides), _compose("run", overrides)
    depth = depth_dataset(depth_cfg)
    run = open_dataset(run_cfg.data, render=False, model_pages=load_vlm(run_cfg.model).pages)  # as commands/run.py
    assert depth.config == run.config
    assert [s.page for s in depth] == [s.page for s in run]
    if not overrides:  # the shipped model's pages, not SynthConfig's defaults
        assert (depth.config.width, depth.config.cell) == (256, (16, 16)) != (SynthConfig().width, SynthConfig().cell)


def test_depth_prints_and_records_page_statistics(tmp_path):
    from cli_helpers import treedec_here

    r = treedec_here("depth", "data.pages=6", "data.page.preset=v2", f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["page_config"]["preset"] == "v2" and s["page_config"]["width"] == PRESETS["v2"]["width"]
    assert s["page_stats"]["regions"][1] > 5 and s["page_stats"]["tokens_text"][1] > 50
    assert "tokens_text" in r.stdout


def test_tiny_v2_experiment_trains_on_v2_model_pages():
    from omegaconf import OmegaConf

    from treedec.training.trainer import TrainConfig

    cfg = _compose("train", ["+experiment=tiny_v2"])
    tcfg = TrainConfig(**OmegaConf.to_container(cfg.train, resolve=True))
    pages = [synth_config(dict(st["page"]), base={"width": 256, "height": 256}) for st in tcfg.stages]
    assert all(p.preset == "v2_model" and p.width == cfg.model.spec.image_size == 640 for p in pages)
    assert pages[-1] == synth_config({"preset": "v2_model"})
    assert pages[-1].cell == (cfg.model.spec.patch_size,) * 2  # one glyph per ViT patch: the grounding losses need it


def test_warm_start_keeps_a_position_grid_of_the_same_size_and_resizes_others():
    import torch

    mod = load_script("experiments/warm_start_v2.py")
    table = torch.randn(16 * 16, 8)
    assert torch.allclose(mod.resize_positions(table, 16), table, atol=1e-5)
    grown = mod.resize_positions(table, 40)
    assert grown.shape == (1600, 8)
    # a smooth grid stays smooth: a linear ramp resized is (close to) a linear ramp
    ramp = torch.arange(16.0).repeat(16, 1).reshape(256, 1)
    row = mod.resize_positions(ramp, 40).reshape(40, 40)[20]
    assert (row[5:35].diff() > 0).all()
