"""The public API for plug-ins: what a fork rule (a file of the top-level `strategies/` folder,
or a package registering through the `treedec.strategies` entry-point group) may import.
Everything else in treedec is internal and may change.

    from treedec.api import Tokenizer, fork_rule

    @fork_rule("table_rows")
    def table_rows(tokens: list[int], tok: Tokenizer) -> list[tuple[int, int]]:
        ...  # spans of a content branch that become branches of their own

`fork_rule` covers rules that cut PaDoc's content branches further (nested forks). A strategy
of another shape registers a factory `(tokenizer, **options) -> Strategy` with
`@STRATEGIES.register(name)`, built from the parts below."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from treedec.engine.policy import Fork
from treedec.graph import DecodingGraph
from treedec.page import Block, Page
from treedec.strategies.base import STRATEGIES, ForkRule, Strategy, Target
from treedec.strategies.nested import Split, any_fork, nested_target
from treedec.strategies.padoc import layout_fork, tree_target
from treedec.tokenizer import Tokenizer

__all__ = ["Block", "DecodingGraph", "Fork", "ForkRule", "Page", "STRATEGIES", "Split", "Strategy", "Target",
           "Tokenizer", "any_fork", "fork_rule", "layout_fork", "nested_target", "tree_target"]


def fork_rule(name: str, *aliases: str, mode: str = "tree_rows") -> Callable[[Split], Split]:
    """Register `split` as strategy `name` (and each alias): PaDoc's layout forks, and each
    content branch cut into the nested branches `split` names; its keyword-only parameters are
    the strategy's options. `mode`: the prompt mode the
    model is asked in (a model decodes a rule well only once trained with it:
    `python -m treedec train strategy=NAME`; the oracle depth needs no model)."""
    def register(split: Split) -> Split:
        for n in (name, *aliases):
            STRATEGIES.register(n)(_factory(n, split, mode))
        return split

    return register


def _factory(name: str, split: Split, mode: str) -> Callable[..., Strategy]:
    """The strategy factory of a rule: its options are the rule's keyword-only parameters
    (`def rule(tokens, tok, *, min_cells=2)`: `strategy.min_cells=3`, or as a base,
    `strategy.base_options={min_cells: 3}`), checked by their signature (`build_strategy`)."""
    options = [p for p in inspect.signature(split).parameters.values() if p.kind is p.KEYWORD_ONLY]

    def factory(tokenizer: Tokenizer, **kw) -> Strategy:
        rule = functools.partial(split, **kw) if kw else split
        return Strategy(name, mode, tokenizer, nested_target(rule), any_fork, nested_drop_head=(tokenizer.child_id,))

    factory.__signature__ = inspect.Signature(
        [inspect.Parameter("tokenizer", inspect.Parameter.POSITIONAL_OR_KEYWORD), *options])
    return factory
