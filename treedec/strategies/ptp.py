"""PTP's drafting (Parallel-Token Prediction, `treedec.drafters.ptp`) in every stream of a fork
strategy: `ptp` = one stream (sequential) + PTP; `strategy=ptp strategy.base=padoc` = PTP in
every branch. No draft model and no MTP head: the placeholders ride in the model's own
forward. Acceptance is exact greedy, so the pages equal the base strategy's."""
from __future__ import annotations

from treedec.drafters.ptp import PTPDrafter
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.speculation import add_drafter, fork_base
from treedec.tokenizer import Tokenizer


@STRATEGIES.register("ptp")
def ptp(tokenizer: Tokenizer, *, base: str = "sequential", k: int = 6, placeholders: str | None = None) -> Strategy:
    """`base` (sequential by default) with K placeholders after each stream's last token and
    after each draft node; `placeholders`: their folder (null: `ptp/` beside the checkpoint)."""
    drafter = PTPDrafter(k, placeholders, tokenizer.eos_id)
    return add_drafter(fork_base(tokenizer, base, "ptp"), drafter, prepare=drafter)
