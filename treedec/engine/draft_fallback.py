"""Drafters in order of preference: each stream gets the first proposal any of them makes
(e.g. pipeline drafts where they match, MTP where they do not). Verdicts go back to the
drafter that proposed."""
from __future__ import annotations

import weakref

from treedec.engine.draft import Drafter, DraftTree, StreamState, Verdict, propose_many
from treedec.graph import DecodingGraph


class FirstOf:
    def __init__(self, drafters: list[Drafter]):
        self.drafters = list(drafters)
        self.wants_hidden = any(getattr(d, "wants_hidden", False) for d in self.drafters)
        self._by = weakref.WeakKeyDictionary()  # page graph -> stream -> drafter of its last proposal

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        return self.propose_many([(graph, sid, sample, state)])[0]

    def propose_many(self, requests: list[tuple[DecodingGraph, int, object, StreamState | None]]
                     ) -> list[DraftTree | None]:
        """`propose` for a step's streams: each drafter in turn is asked (batched where it can
        be) for the streams no earlier one proposed for."""
        out: list[DraftTree | None] = [None] * len(requests)
        for d in self.drafters:
            todo = [i for i, t in enumerate(out) if not t]
            if not todo:
                break
            for i, tree in zip(todo, propose_many(d, [requests[i] for i in todo])):
                if tree:
                    self._by.setdefault(requests[i][0], {})[requests[i][1]] = d
                    out[i] = tree
        return out

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        d = self._by.get(graph, {}).get(sid)
        observe = getattr(d, "observe", None)
        if observe is not None:
            observe(graph, sid, sample, tree, verdict)
