"""PaDoc / HPD fork protocol: the layout stream forks a content branch at each `<FORK>`;
the branch starts with `<CHILD>` at the fork's position and sees [prompt, layout<=k]."""
from treedec.engine.policy import Fork
from treedec.graph import DecodingGraph
from treedec.strategies.base import FORK_RULES, STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer


@FORK_RULES.register("layout")
def layout_fork(graph: DecodingGraph, sid: int, index: int, tok: Tokenizer) -> list[Fork]:
    s = graph[sid]
    if s.parent is None and s.tokens[index] == tok.fork_id:
        k = sum(1 for t in s.tokens[s.prompt_len:index + 1] if t == tok.fork_id)
        return [Fork(sid, index, (tok.child_id,), f"block {k}")]
    return []


@STRATEGIES.register("padoc")
def padoc(tokenizer: Tokenizer) -> Strategy:
    return Strategy("padoc", "tree", tokenizer, layout_fork)
