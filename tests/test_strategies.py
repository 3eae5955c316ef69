"""Strategies: registry <-> configs, ground-truth graphs, and nested forks on the engine."""
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import treedec
from treedec.depth import page_depth
from treedec.engine.engine import Engine
from treedec.errors import UserError
from treedec.models.adapter import CausalLMAdapter
from treedec.serialize import page_to_flat
from treedec.strategies.base import STRATEGIES, build_strategy, default_config

from engine_helpers import TOK, ForcedRows, prompt, tiny_llama
from test_engine import hf_greedy

CONF = Path(treedec.__file__).parent / "conf" / "strategy"


def test_every_strategy_has_a_config_and_every_config_binds():
    configs = {p.stem: OmegaConf.load(p) for p in CONF.glob("*.yaml")}
    plugins = set(STRATEGIES.names()) - set(configs)  # the top-level strategies/ folder: configs from the factory
    assert {"table_rows", "padoc_rows", "table_cells"} <= plugins
    configs.update({name: OmegaConf.create(default_config(name)) for name in plugins})
    assert set(configs) == set(STRATEGIES.names())
    for name, cfg in configs.items():
        assert cfg.name == name
        strategy = build_strategy(OmegaConf.to_container(cfg), TOK)  # every key binds to the factory
        assert strategy.name == name


def test_unknown_strategy_or_key_is_a_user_error():
    with pytest.raises(UserError, match="did you mean 'padoc'"):
        STRATEGIES.get("padc")
    with pytest.raises(UserError, match="bad config for strategy 'hsd'"):
        build_strategy({"name": "hsd", "window": 4}, TOK)


@pytest.mark.parametrize("name", ["sequential", "padoc", "padoc_rows", "table_rows", "table_cells"])
def test_targets_splice_back_to_the_flat_form(name, synth_pages):
    strategy = STRATEGIES.get(name)(TOK)
    for page in synth_pages[:30]:
        g = strategy.target(page, TOK, [TOK.image_id])
        assert strategy.flat_text(g) == page_to_flat(page)


def test_nested_rows_cut_table_depth(synth_pages):
    pad, rows = STRATEGIES.get("padoc")(TOK), STRATEGIES.get("padoc_rows")(TOK)
    with_tables = [p for p in synth_pages if any(b.category == "table" for b in p.blocks)]
    assert with_tables
    for page in with_tables:
        assert page_depth(page, rows)["fork_depth"] <= page_depth(page, pad)["fork_depth"]
    assert any(page_depth(p, rows)["fork_depth"] < page_depth(p, pad)["fork_depth"] for p in with_tables)


def test_nested_tree_engine_equals_per_branch_decoding():
    model = tiny_llama(8)
    p = prompt(9)
    proc = ForcedRows(len(p.ids), rows=[2, 3], row_len=4)
    strategy = STRATEGIES.get("padoc_rows")(TOK)
    [r] = list(Engine(CausalLMAdapter(model), strategy, processors=[proc]).run([("p", p, None)]))
    g = r.graph
    depth2 = [s for s in g.streams if s.parent not in (None, 0)]
    assert len(g.children(0)) == 2 and len(depth2) == 5
    for s in g.streams[1:]:
        ctx = g.context(s.id)[: -len(s.tokens)] + s.tokens[:1]
        assert s.tokens[1:] == hf_greedy(model, ctx, 100, proc), s.label
    flat = strategy.flat_text(g)
    assert flat.count("<tr>") == 5 and "<FORK>" not in flat and "<tr><CHILD>" not in flat
    assert r.steps == g.critical_path()
