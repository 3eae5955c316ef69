"""HPD's drafting half: MTP drafts (`treedec.drafters.mtp`) in every stream of a fork
strategy. `mtp` = one stream (sequential) + MTP; `hpd`, a preset of it = PaDoc's fork + MTP
in every branch (HPD-Parsing). Any fork strategy: `strategy=mtp strategy.base=padoc_rows`.
Acceptance is exact greedy, so the pages equal the base strategy's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from treedec.drafters.mtp import MTPDrafter
from treedec.strategies.base import STRATEGIES, Strategy, options_of
from treedec.strategies.speculation import add_drafter, fork_base
from treedec.tokenizer import Tokenizer


@dataclass
class MTPOptions:
    """mtp's options, and hpd's (the keys of conf/strategy/mtp.yaml; registered with Hydra as
    `schema/strategy_mtp`)."""
    name: str = "mtp"
    base: str = "sequential"  # the fork strategy drafted in, by name: sequential | padoc | padoc_rows | ...
    # the base's own options (e.g. a fork rule's), checked against its factory (a mapping; Any: OmegaConf cannot
    # set a dict into a null typed-dict node)
    base_options: Any = None
    k: int = 6  # look-ahead depths drafted per step
    top: int = 1  # first-token alternatives, each continued as a chain (1: HPD's single chain; >1: a draft tree)
    head: str | None = None  # the head's folder; null: mtp/ beside the model's checkpoint


def with_mtp(strategy: Strategy, k: int, head: str | None, top: int = 1) -> Strategy:
    return add_drafter(strategy, MTPDrafter(k, head, strategy.tokenizer.eos_id, top))


def _mtp(tokenizer: Tokenizer, name: str, options: dict, **preset) -> Strategy:
    o = options_of(MTPOptions, name, {**preset, **options})
    return with_mtp(fork_base(tokenizer, o.base, name, o.base_options), o.k, o.head, o.top)


@STRATEGIES.register("mtp")
def mtp(tokenizer: Tokenizer, **options) -> Strategy:
    """`base` (sequential by default) with a K-token MTP chain per stream and step; `head`:
    the head's folder (null: `mtp/` beside the model's checkpoint); `top` > 1: that many
    chains from the head's likeliest first tokens (a draft tree). Keyword options: `MTPOptions`."""
    return _mtp(tokenizer, "mtp", options)


@STRATEGIES.register("hpd")
def hpd(tokenizer: Tokenizer, **options) -> Strategy:
    """HPD-Parsing, a preset of `mtp`: PaDoc's fork protocol with MTP drafts in every branch."""
    return _mtp(tokenizer, "hpd", options, base="padoc")
