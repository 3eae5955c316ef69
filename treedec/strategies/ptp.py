"""PTP's drafting (Parallel-Token Prediction, `treedec.drafters.ptp`) in every stream of a fork
strategy: `ptp` = one stream (sequential) + PTP; `strategy=ptp strategy.base=padoc` = PTP in
every branch. No draft model and no MTP head: the placeholders ride in the model's own
forward. Acceptance is exact greedy, so the pages equal the base strategy's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from treedec.drafters.ptp import PTPDrafter
from treedec.strategies.base import STRATEGIES, Strategy, options_of
from treedec.strategies.speculation import add_drafter, fork_base
from treedec.tokenizer import Tokenizer


@dataclass
class PTPOptions:
    """ptp's options (the keys of conf/strategy/ptp.yaml; registered with Hydra as `schema/strategy_ptp`)."""
    name: str = "ptp"
    base: str = "sequential"  # the fork strategy drafted in, by name: sequential | padoc | ...
    base_options: Any = None  # the base's own options, checked against its factory
    k: int = 6  # placeholders per anchor: tokens drafted per step
    placeholders: str | None = None  # their folder; null: ptp/ beside the model's checkpoint


@STRATEGIES.register("ptp")
def ptp(tokenizer: Tokenizer, **options) -> Strategy:
    """`base` (sequential by default) with K placeholders after each stream's last token and
    after each draft node. Keyword options: `PTPOptions`."""
    o = options_of(PTPOptions, "ptp", options)
    return add_drafter(fork_base(tokenizer, o.base, "ptp", o.base_options), PTPDrafter(o.k, o.placeholders, tokenizer.eos_id))
