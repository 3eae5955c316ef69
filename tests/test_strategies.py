"""Strategies: registry <-> configs, ground-truth graphs, and nested forks on the engine."""
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import treedec
from treedec.engine.engine import Engine
from treedec.errors import UserError
from treedec.formats.contract import page_to_flat
from treedec.models.adapter import CausalLMAdapter
from treedec.page import Block, Page
from treedec.results.depth import page_depth
from treedec.strategies.base import STRATEGIES, build_strategy, default_config

from engine_helpers import TOK, ForcedRows, prompt, tiny_llama
from test_engine import hf_greedy

CONF = Path(treedec.__file__).parent / "conf" / "strategy"


def composed(*overrides: str) -> dict:
    """The `strategy` config `python -m treedec run` composes (YAML presets and schemas included)."""
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        return OmegaConf.to_container(compose(config_name="run", overrides=list(overrides)).strategy)


def test_every_strategy_has_a_config_and_every_config_binds():
    files = {p.stem for p in CONF.glob("*.yaml")}
    plugins = set(STRATEGIES.names()) - files  # the top-level strategies/ folder: configs from the factory
    assert {"table_rows", "padoc_rows", "table_cells"} <= plugins
    configs = {name: composed(f"strategy={name}") for name in STRATEGIES.names()}
    assert all(configs[n] == default_config(n) for n in plugins)
    for name, cfg in configs.items():
        assert cfg["name"] == name
        strategy = build_strategy(cfg, TOK)  # every key binds to the factory
        assert strategy.name == name


def test_presets_are_their_base_config_with_a_few_keys_changed():
    """`hpd` and `padoc_hsd` are presets (YAML `defaults:` over mtp and hsd, one schema each), and
    their factories give the strategy their composed config gives."""
    for preset, over, changed in (("hpd", "mtp", {"name": "hpd", "base": "padoc"}),
                                  ("padoc_hsd", "hsd", {"name": "padoc_hsd", "base": "padoc", "draft_len": "fixed"})):
        assert composed(f"strategy={preset}") == {**composed(f"strategy={over}"), **changed}
        assert len((CONF / f"{preset}.yaml").read_text().splitlines()) < 12
        by_name, by_config = build_strategy({"name": preset}, TOK), build_strategy(composed(f"strategy={preset}"), TOK)
        assert (by_name.name, by_name.mode, type(by_name.drafter)) == (by_config.name, by_config.mode,
                                                                      type(by_config.drafter))


def test_a_bases_own_options_pass_through(monkeypatch):
    """`strategy=hsd strategy.base=RULE strategy.base_options={...}`: the base's options reach its
    factory (a fork rule's keyword-only parameters), checked there: a bad one is one line."""
    from treedec.api import _factory

    seen = []

    def rows(tokens, tok, *, every: int = 1):
        seen.append(every)
        return [(i, i + 1) for i in range(0, len(tokens) - 1, every)]

    STRATEGIES.names()  # every plug-in loaded first
    monkeypatch.setitem(STRATEGIES._items, "rows_every", _factory("rows_every", rows, "tree_rows"))
    assert default_config("rows_every") == {"name": "rows_every", "every": 1}
    for name in ("hsd", "mtp"):
        s = build_strategy({"name": name, "base": "rows_every", "base_options": {"every": 3}}, TOK)
        assert s.mode == "tree_rows" and s.fork_rule is not None
        s.target(Page(100, 100, [Block("text_block", (0, 0, 50, 50), "ab cd ef")]), TOK, [TOK.image_id])
        assert seen[-1] == 3
    with pytest.raises(UserError, match="bad config for strategy 'rows_every'") as e:
        build_strategy({"name": "hsd", "base": "rows_every", "base_options": {"evry": 3}}, TOK)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="strategy.base must name a fork strategy without drafts or stages"):
        build_strategy({"name": "mtp", "base": "hpd"}, TOK)


def test_every_strategy_config_has_a_schema(monkeypatch):
    """Every strategy's config is a dataclass schema (issue 33.1): an option-less one (sequential,
    padoc, crops, a fork rule without options) takes no key, and a plug-in's options are typed by
    its factory's annotations."""
    from hydra.errors import ConfigCompositionException

    from treedec.api import _factory

    def rows(tokens, tok, *, every: int = 1):
        return []

    STRATEGIES.names()
    monkeypatch.setitem(STRATEGIES._items, "rows_every", _factory("rows_every", rows, "tree_rows"))
    assert composed("strategy=rows_every", "strategy.every=3") == {"name": "rows_every", "every": 3}
    with pytest.raises(ConfigCompositionException):
        composed("strategy=rows_every", "strategy.every=often")  # not an int
    for name in ("sequential", "padoc", "crops", "table_rows"):
        assert composed(f"strategy={name}") == {"name": name}
        with pytest.raises(ConfigCompositionException):
            composed(f"strategy={name}", "strategy.window=4")  # no such option
        with pytest.raises(UserError, match=f"bad config for strategy '{name}'"):  # added anyway (+): the factory's
            build_strategy(composed(f"strategy={name}", "+strategy.window=4"), TOK)


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
