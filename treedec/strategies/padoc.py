"""PaDoc / HPD fork protocol: the layout stream forks a content branch at each `<FORK>`;
the branch starts with `<CHILD>` at the fork's position and sees [prompt, layout<=k]."""
from treedec.engine.policy import Fork
from treedec.formats import Format, get_format
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.tokenizer import Tokenizer


def tree_target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
    """The root stream is the prompt followed by the layout stream; each `<FORK>` starts a
    branch `<CHILD>content<eos>` at its position (the tree form of `fmt`, a format with forks;
    None: treedec's)."""
    fmt = fmt or get_format("treedec")
    tree = fmt.render_tree(page)
    g = DecodingGraph()
    root = g.root(prompt)
    k = 0
    for t in fmt.encode(tok, tree.layout):
        g.append(root.id, [t])
        if t == tok.fork_id:
            branch = fmt.encode(tok, tree.branches[k])
            child = g.fork(root.id, at=len(root.tokens) - 1, first=branch[:1], label=f"block {k + 1}")
            g.append(child.id, branch[1:])
            g.finish(child.id)
            k += 1
    g.finish(root.id)
    return g


def layout_fork(graph: DecodingGraph, sid: int, index: int, tok: Tokenizer) -> list[Fork]:
    s = graph[sid]
    if s.parent is None and s.tokens[index] == tok.fork_id:
        k = sum(1 for t in s.tokens[s.prompt_len:index + 1] if t == tok.fork_id)
        return [Fork(sid, index, (tok.child_id,), f"block {k}")]
    return []


@STRATEGIES.register("padoc")
def padoc(tokenizer: Tokenizer) -> Strategy:
    return Strategy("padoc", "tree", tokenizer, tree_target, layout_fork)
