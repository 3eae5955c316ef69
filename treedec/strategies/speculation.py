"""Speculation wraps any fork strategy: a drafting strategy (hsd, mtp, hpd, padoc_hsd) is a
base strategy named in its config (`strategy.base=padoc_rows`) plus draft sources (and, for
HSD, the stages before decoding that draft the pages). Sources added to a strategy that
drafts already come after its own (`FirstOf`)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from treedec.engine.draft import DraftSource
from treedec.engine.draft_fallback import FirstOf
from treedec.errors import UserError
from treedec.strategies.base import Strategy, build_strategy
from treedec.tokenizer import Tokenizer


def fork_base(tokenizer: Tokenizer, base: str, name: str, options: Mapping[str, Any] | None = None) -> Strategy:
    """The fork strategy `base` (registered, drafting nothing, no stages of its own) with its own
    `options` (`strategy.base_options`: checked against its factory), renamed `name`."""
    strategy = build_strategy({**dict(options or {}), "name": base}, tokenizer)
    if strategy.drafter is not None or strategy.before is not None or strategy.after is not None:
        raise UserError(f"strategy.base must name a fork strategy without drafts or stages (sequential, padoc, "
                        f"padoc_rows, ...), got {base!r}")
    return replace(strategy, name=name)


def add_drafter(strategy: Strategy, drafter: DraftSource) -> Strategy:
    """A copy of `strategy` drafting with `drafter` too (after its own drafter, if any)."""
    return replace(strategy, drafter=FirstOf([strategy.drafter, drafter]) if strategy.drafter is not None else drafter)
