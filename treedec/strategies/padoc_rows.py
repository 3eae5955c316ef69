"""A new fork rule in one file: PaDoc plus nested forks per table row.

The layout forks a branch per block (as PaDoc); a table branch forks again at every row:
it emits `<tr><FORK>` and a row branch `<CHILD>cells</tr><eos>` decodes that row while
the table branch goes on to the next row. Depth of a table drops from its length to
(skeleton + longest row). Config: `strategy=padoc_rows`.
"""
from treedec.engine.policy import Fork
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.padoc import tree_target
from treedec.tokenizer import Tokenizer


def any_fork(graph: DecodingGraph, sid: int, index: int, tok: Tokenizer) -> list[Fork]:
    """Fork wherever a stream emits `<FORK>` (any depth)."""
    s = graph[sid]
    if s.tokens[index] == tok.fork_id and index >= s.prompt_len:
        return [Fork(sid, index, (tok.child_id,), f"{s.label or 'root'}/{len(graph.children(sid)) + 1}")]
    return []


def rows_target(page: Page, tok: Tokenizer, prompt: list[int]) -> DecodingGraph:
    """PaDoc's tree with every table branch split into one branch per `<tr>...</tr>`."""
    flat = tree_target(page, tok, prompt)
    tr, end_tr = tok.vocab["<tr>"], tok.vocab["</tr>"]
    g = DecodingGraph()
    g.root(flat[0].tokens[: flat[0].prompt_len])
    g.append(0, flat[0].tokens[flat[0].prompt_len:])
    g.finish(0)
    for c in flat.children(0):
        b = flat[c]
        child = g.fork(0, b.fork_at, b.tokens[:1], b.label)
        rows: list[list[int]] = []
        body = b.tokens[1:]
        i = 0
        while i < len(body):
            t = body[i]
            if t == tr and end_tr in body[i:]:
                j = body.index(end_tr, i)
                g.append(child.id, [tr, tok.fork_id])
                rows.append(body[i + 1: j + 1])
                i = j + 1
            else:
                g.append(child.id, [t])
                i += 1
        forks = [k for k, t in enumerate(g[child.id].tokens) if t == tok.fork_id]
        for at, row in zip(forks, rows):
            r = g.fork(child.id, at, [tok.child_id], f"{b.label} row")
            g.append(r.id, row + [tok.eos_id])
            g.finish(r.id)
        g.finish(child.id)
    return g


@STRATEGIES.register("padoc_rows")
def padoc_rows(tokenizer: Tokenizer) -> Strategy:
    return Strategy("padoc_rows", "tree_rows", tokenizer, rows_target, any_fork,
                    nested_drop_head=(tokenizer.child_id,))
