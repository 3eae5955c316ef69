"""Speculation wraps any fork strategy: a drafting strategy (hsd, mtp, hpd, padoc_hsd) is a
base strategy named in its config (`strategy.base=padoc_rows`) plus drafters and the work
they need before decoding (`prepare`). Drafters added to a strategy that drafts already
come after its own (`FirstOf`); prepares run in order, their per-page figures merged."""
from __future__ import annotations

from dataclasses import replace

from treedec.engine.draft import Drafter
from treedec.engine.draft_fallback import FirstOf
from treedec.errors import UserError
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer


def fork_base(tokenizer: Tokenizer, base: str, name: str) -> Strategy:
    """The fork strategy `base` (registered, drafting nothing), renamed `name`."""
    strategy = STRATEGIES.get(base)(tokenizer)
    if strategy.drafter is not None or strategy.prepare is not None:
        raise UserError(f"strategy.base must name a fork strategy without drafts (sequential, padoc, padoc_rows, ...), "
                        f"got {base!r}")
    return replace(strategy, name=name)


class Prepares:
    """Several `prepare` steps run in order; a page's figures merged."""

    def __init__(self, steps):
        self.steps = list(steps)

    def __call__(self, vlm, samples, runtime, progress: bool = True) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for step in self.steps:
            for name, figures in step(vlm, samples, runtime, progress).items():
                out.setdefault(name, {}).update(figures)
        return out


def add_drafter(strategy: Strategy, drafter: Drafter, prepare=None) -> Strategy:
    """`strategy` drafting with `drafter` too (after its own drafter, if any)."""
    strategy.drafter = FirstOf([strategy.drafter, drafter]) if strategy.drafter is not None else drafter
    if prepare is not None:
        strategy.prepare = Prepares([strategy.prepare, prepare]) if strategy.prepare is not None else prepare
    return strategy
