"""HPD's drafting half: MTP drafts (`treedec.drafters.mtp`) in every stream of a fork
strategy. `mtp` = one stream (sequential) + MTP; `hpd` = PaDoc's fork + MTP in every
branch (HPD-Parsing). Any fork strategy: `strategy=mtp strategy.base=padoc_rows`.
Acceptance is exact greedy, so the pages equal the base strategy's."""
from __future__ import annotations

from treedec.drafters.mtp import MTPDrafter
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.speculation import add_drafter, fork_base
from treedec.tokenizer import Tokenizer


def with_mtp(strategy: Strategy, k: int, head: str | None, top: int = 1) -> Strategy:
    return add_drafter(strategy, MTPDrafter(k, head, strategy.tokenizer.eos_id, top))


@STRATEGIES.register("mtp")
def mtp(tokenizer: Tokenizer, *, base: str = "sequential", k: int = 6, head: str | None = None, top: int = 1
        ) -> Strategy:
    """`base` (sequential by default) with a K-token MTP chain per stream and step; `head`:
    the head's folder (null: `mtp/` beside the model's checkpoint); `top` > 1: that many
    chains from the head's likeliest first tokens (a draft tree)."""
    return with_mtp(fork_base(tokenizer, base, "mtp"), k, head, top)


@STRATEGIES.register("hpd")
def hpd(tokenizer: Tokenizer, *, base: str = "padoc", k: int = 6, head: str | None = None, top: int = 1
        ) -> Strategy:
    """HPD-Parsing: PaDoc's fork protocol with MTP drafts in every branch (`mtp`'s options)."""
    return with_mtp(fork_base(tokenizer, base, "hpd"), k, head, top)
