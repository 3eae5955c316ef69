"""Sequential: the flat form in one stream, no forks (the baseline)."""
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.serialize import page_to_flat
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer
from treedec.training.packing import flat_graph


def flat_target(page: Page, tok: Tokenizer, prompt: list[int]) -> DecodingGraph:
    return flat_graph(prompt, tok.encode(page_to_flat(page)))


@STRATEGIES.register("sequential")
def sequential(tokenizer: Tokenizer) -> Strategy:
    return Strategy("sequential", "flat", tokenizer, flat_target)
