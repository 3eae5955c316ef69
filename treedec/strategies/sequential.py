"""Sequential: the flat form in one stream, no forks (the baseline)."""
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer


@STRATEGIES.register("sequential")
def sequential(tokenizer: Tokenizer) -> Strategy:
    return Strategy("sequential", "flat", tokenizer)
