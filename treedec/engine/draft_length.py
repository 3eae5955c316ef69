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

from treedec.engine.draft import DraftRequest, DraftSource, DraftTree, StreamState, Verdict
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
    """A draft source wrapping another, its proposals cut to each stream's cap; the engine
    tells it each verdict (`observe`). Its capabilities are the inner source's."""
    inner: DraftSource
    limit: int = 15
    # page graph -> stream -> cap; a page's caps go with its graph (no state across runs)
    caps: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)

    def __post_init__(self):
        self.trees, self.needs_hidden = self.inner.trees, self.inner.needs_hidden
        self.pages_ahead, self.depth = self.inner.pages_ahead, self.limit
        self.drafts_in_forward = self.inner.drafts_in_forward

    # a pages-ahead source's extras (treedec/drafters/README.md: matcher, sequences, step_only, use), the inner one's
    @property
    def matcher(self):
        return self.inner.matcher

    def sequences(self, names: list[str], prompt_ids: list[int]) -> list[list[int]]:
        return self.inner.sequences(names, prompt_ids)

    @property
    def step_only(self) -> tuple[str, ...]:
        return self.inner.step_only + (f"draft_len=adaptive (a per-stream cap on the draft depth, up to {self.limit})",)

    def use(self, name: str, *drafts) -> None:
        self.inner.use(name, *drafts)

    def for_run(self, vlm) -> "AdaptiveLength":
        return AdaptiveLength(self.inner.for_run(vlm), self.limit)

    def propose(self, graph: DecodingGraph, sid: int, sample: object, state: StreamState | None = None
                ) -> DraftTree | None:
        return self.propose_many([(graph, sid, sample, state)])[0]

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return [cut(tree, self.caps.get(r[0], {}).get(r[1], self.limit)) if tree else tree
                for r, tree in zip(requests, self.inner.propose_many(requests))]

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        caps = self.caps.setdefault(graph, {})
        deepest = max(tree.depths(), default=0)
        accepted = len(verdict.nodes)
        cap = caps.get(sid, self.limit)
        caps[sid] = min(self.limit, 2 * cap) if accepted >= deepest else max(1, accepted + 1)
