"""Sequential: the flat form in one stream, no forks (the baseline)."""
from treedec.formats import Format, get_format
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer
from treedec.training.packing import flat_graph


def flat_target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
    """The page as the format writes it in one stream (None: treedec's flat form)."""
    fmt = fmt or get_format("treedec")
    return flat_graph(prompt, fmt.encode(tok, fmt.render(page)))


@STRATEGIES.register("sequential")
def sequential(tokenizer: Tokenizer) -> Strategy:
    return Strategy("sequential", "flat", tokenizer, flat_target)
