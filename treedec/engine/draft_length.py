"""How many draft tokens a stream is worth: an adaptive cap on a drafter's proposals.

Verification is exact whatever the cap, so the cap trades nothing but work: every proposed
token is a row of the next forward, and a rejected one is a row spent for nothing. Where a
forward's cost grows with its rows (a CPU; a GPU at high concurrency) a stream whose drafts
keep failing should propose little, and one whose drafts keep landing should propose much.
The rule, per stream: start at the drafter's own limit; after each verdict, if the whole
proposed depth was accepted, double the cap (up to the limit); otherwise set it to one more
than what was accepted. A tree is cut to the nodes within the cap's depth.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from treedec.engine.draft import Drafter, DraftTree, StreamState, Verdict
from treedec.graph import DecodingGraph


def cut(tree: DraftTree, depth: int) -> DraftTree:
    """The nodes of `tree` at most `depth` deep (parents come first, so they stay)."""
    keep = [i for i, d in enumerate(tree.depths()) if d <= depth]
    if len(keep) == len(tree):
        return tree
    index = {old: new for new, old in enumerate(keep)}
    return DraftTree([tree.tokens[i] for i in keep], [index.get(tree.parents[i], -1) for i in keep])


@dataclass
class AdaptiveLength:
    """A `Drafter` wrapping another, its proposals cut to each stream's cap; the engine
    tells it each verdict (`observe`)."""
    inner: Drafter
    limit: int = 15
    # page graph -> stream -> cap; a page's caps go with its graph (no state across runs)
    caps: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)

    @property
    def wants_hidden(self) -> bool:
        return getattr(self.inner, "wants_hidden", False)

    def propose(self, graph: DecodingGraph, sid: int, sample: object, state: StreamState | None = None
                ) -> DraftTree | None:
        tree = self.inner.propose(graph, sid, sample, state)
        if not tree:
            return tree
        return cut(tree, self.caps.get(graph, {}).get(sid, self.limit))

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        caps = self.caps.setdefault(graph, {})
        deepest = max(tree.depths(), default=0)
        accepted = len(verdict.nodes)
        cap = caps.get(sid, self.limit)
        caps[sid] = min(self.limit, 2 * cap) if accepted >= deepest else max(1, accepted + 1)
