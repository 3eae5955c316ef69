"""Draft sources in order of preference: each stream gets the first proposal any of them
makes (e.g. pipeline drafts where they match, MTP where they do not). Verdicts go back to
the source that proposed. Its capabilities are its sources' together."""
from __future__ import annotations

import weakref

from treedec.engine.draft import DraftRequest, DraftSource, DraftTree, Verdict
from treedec.graph import DecodingGraph


class FirstOf:
    def __init__(self, sources: list[DraftSource]):
        self.drafters = list(sources)
        self.trees = any(d.trees for d in self.drafters)
        self.needs_hidden = any(d.needs_hidden for d in self.drafters)
        self.pages_ahead = any(d.pages_ahead for d in self.drafters)
        self.depth = max(d.depth for d in self.drafters)
        self.drafts_in_forward = any(d.drafts_in_forward for d in self.drafters)
        if self.drafts_in_forward:  # its rows' tokens are read back by index: it cannot share a tree
            raise ValueError("a source that drafts inside the forward (PTP) cannot be combined with another")
        self._by = weakref.WeakKeyDictionary()  # page graph -> stream -> source of its last proposal

    def for_run(self, vlm) -> "FirstOf":
        return FirstOf([d.for_run(vlm) for d in self.drafters])

    def use(self, name: str, *drafts) -> None:
        """A page's drafts, handed to its sources that know pages ahead (`pages_ahead`)."""
        for d in self.drafters:
            if d.pages_ahead:
                d.use(name, *drafts)

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        """Each source in turn is asked (all at once) for the streams no earlier one proposed for."""
        out: list[DraftTree | None] = [None] * len(requests)
        for d in self.drafters:
            todo = [i for i, t in enumerate(out) if not t]
            if not todo:
                break
            for i, tree in zip(todo, d.propose_many([requests[i] for i in todo])):
                if tree:
                    self._by.setdefault(requests[i][0], {})[requests[i][1]] = d
                    out[i] = tree
        return out

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        d = self._by.get(graph, {}).get(sid)
        if d is not None:
            d.observe(graph, sid, sample, tree, verdict)
