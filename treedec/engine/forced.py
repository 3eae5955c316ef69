"""Forced decoding: every token chosen from the page's ground truth, the model's forward run in
full (its cost is real) and its logits unread for the choice.

The ground truth is the strategy's own target graph of the page (`Strategy.target`: the flat
form for `sequential`, the tree for `padoc` and the fork rules, a region's content for a
crop). Every context a stream of that graph sees (its ancestors' prefixes and its own tokens)
goes into one trie; a node's choice is the token the target's stream emits there. A fork's
first tokens (`<CHILD>`) are the fork rule's, not the model's: they are trie edges, never a
choice. The engine asks, per stream, for the token after its last token and after each draft
node; drafts, acceptance, forks and splices run as for any model. A context the target does
not hold (a rejected draft's path) gets `<eos>`: the acceptor never keeps it. A context after
which the target emits two different tokens (`crops`' target: every crop branch after the whole
layout; the layout pass never decodes them) cannot be forced: a stream that reaches one is an
error.
"""
from __future__ import annotations

from treedec.engine.draft import DraftTree
from treedec.errors import UserError
from treedec.graph import DecodingGraph

OFF = -1  # a context outside the target
TWO = -2  # a context after which the target emits two different tokens


class ForcedChoice:
    def __init__(self, target: DecodingGraph, eos_id: int):
        self.eos_id = eos_id
        self.edges: dict[tuple[int, int], int] = {}  # (node, token) -> node
        self.choice: dict[int, int] = {}  # node -> the token the target emits there
        self._nodes: dict[int, list[int]] = {}  # a decoded stream -> the trie node after each of its tokens
        seen: dict[int, list[int]] = {}
        for s in target.streams:  # parents come before their children
            node = 0 if s.parent is None else seen[s.parent][s.fork_at - 1]
            nodes = []
            for i, t in enumerate(s.tokens):
                if i >= s.prompt_len and self.choice.setdefault(node, t) != t:
                    self.choice[node] = TWO
                node = self.edges.setdefault((node, t), len(self.edges) + 1)
                nodes.append(node)
            seen[s.id] = nodes

    @classmethod
    def of(cls, policy, sample, prompt_ids: list[int]) -> "ForcedChoice":
        """The forcing of one page: `policy.target` (a `Strategy`'s) of the sample's ground truth."""
        truth = sample.page
        if truth is None:
            raise UserError(f"model=forced needs every page's ground truth; {sample.name!r} has "
                            "none (use data=omnidocbench or data=synth)")
        tok = policy.tokenizer
        return cls(policy.truth(truth, list(prompt_ids)), tok.eos_id)

    def _walk(self, node: int, token: int) -> int:
        return OFF if node == OFF else self.edges.get((node, token), OFF)

    def _after(self, graph: DecodingGraph, sid: int, n: int) -> int:
        """The node after stream `sid`'s first `n` tokens (its ancestors' prefixes before them)."""
        s = graph[sid]
        nodes = self._nodes.setdefault(sid, [])
        if len(nodes) < n:
            node = nodes[-1] if nodes else 0 if s.parent is None else self._after(graph, s.parent, s.fork_at)
            for t in s.tokens[len(nodes):n]:
                node = self._walk(node, t)
                nodes.append(node)
        return nodes[n - 1] if n else 0 if s.parent is None else self._after(graph, s.parent, s.fork_at)

    def choose(self, graph: DecodingGraph, sid: int, tree: DraftTree | None) -> list[int]:
        """The target's token after stream `sid`'s last token, then after each draft node."""
        last = self._after(graph, sid, len(graph[sid].tokens))
        nodes = [last]
        for tok, parent in zip(tree.tokens, tree.parents) if tree else ():
            nodes.append(self._walk(nodes[parent + 1], tok))
        choices = [self.choice.get(n, self.eos_id) for n in nodes]
        if choices[0] == TWO:
            raise ValueError(f"stream {sid} reached a context after which the target emits two different tokens")
        return [self.eos_id if c == TWO else c for c in choices]
