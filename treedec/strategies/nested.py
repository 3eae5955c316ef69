"""Nested forks: PaDoc's tree with parts of a content branch moved into branches of their own.

A rule names the parts: `split(tokens, tok) -> [(start, end), ...]`, spans of a content
branch's tokens (after its `<CHILD>`). The branch keeps what is outside the spans and writes
`<FORK>` in place of each; the span's branch `<CHILD>span<eos>` starts at that `<FORK>` and
sees the branch up to it. Flattening splices each span back in place of its `<FORK>`."""
from __future__ import annotations

from typing import Callable

from treedec.engine.policy import Fork
from treedec.formats import Format
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.strategies.base import Target
from treedec.strategies.padoc import tree_target
from treedec.tokenizer import Tokenizer

Split = Callable[[list[int], Tokenizer], list[tuple[int, int]]]
"""(a content branch's tokens after `<CHILD>`, tokenizer) -> spans that become nested branches."""


def any_fork(graph: DecodingGraph, sid: int, index: int, tok: Tokenizer) -> list[Fork]:
    """Fork wherever a stream emits `<FORK>` (any depth)."""
    s = graph[sid]
    if s.tokens[index] == tok.fork_id and index >= s.prompt_len:
        return [Fork(sid, index, (tok.child_id,), f"{s.label or 'root'}/{len(graph.children(sid)) + 1}")]
    return []


def nested_target(split: Split) -> Target:
    """The ground-truth graph of a nested rule: PaDoc's tree, each content branch cut by `split`."""
    def target(page: Page, tok: Tokenizer, prompt: list[int], fmt: Format | None = None) -> DecodingGraph:
        tree = tree_target(page, tok, prompt, fmt)
        g = DecodingGraph()
        g.root(tree[0].tokens[: tree[0].prompt_len])
        g.append(0, tree[0].tokens[tree[0].prompt_len:])
        g.finish(0)
        for c in tree.children(0):
            b = tree[c]
            body, kept, parts, i = b.tokens[1:], [], [], 0
            for start, end in split(body, tok):
                kept += body[i:start] + [tok.fork_id]
                parts.append(body[start:end])
                i = end
            child = g.fork(0, b.fork_at, b.tokens[:1], b.label)
            g.append(child.id, kept + body[i:])
            forks = [k for k, t in enumerate(g[child.id].tokens) if t == tok.fork_id]
            for n, (at, part) in enumerate(zip(forks, parts)):
                r = g.fork(child.id, at, [tok.child_id], f"{b.label}/{n + 1}")
                g.append(r.id, part + [tok.eos_id])
                g.finish(r.id)
            g.finish(child.id)
        return g

    return target
