"""What the engine asks of a decoding strategy (it never knows one by name)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from treedec.engine.draft import DraftTree, StreamState, Verdict
from treedec.graph import DecodingGraph


@dataclass(frozen=True)
class Fork:
    """Start a child of `parent` seeing its tokens [0, at), beginning with `first`."""
    parent: int
    at: int
    first: tuple[int, ...]
    label: str = ""


class Policy(Protocol):
    def forks(self, graph: DecodingGraph, sid: int, index: int) -> list[Fork]:
        """Forks caused by token `index` of stream `sid`, just produced."""

    def is_end(self, graph: DecodingGraph, sid: int, token: int) -> bool:
        """Does `token` end stream `sid`?"""

    def draft(self, graph: DecodingGraph, sid: int, sample: object, state: StreamState | None = None
              ) -> DraftTree | None:
        """A draft tree continuing `sid`, or None (no speculation)."""

    def accept(self, tree: DraftTree, choices: list[int], logits) -> Verdict:
        """Which draft nodes to keep, given the model's (greedy) token after the stream's last
        token and after each draft node, and those rows' logits [1 + len(tree), V]."""

    # Optional: observe(graph, sid, sample, tree, verdict) -> None, told every verdict on a
    # draft (e.g. treedec.engine.draft_length.AdaptiveLength adapts its proposals' depth).
    # Optional: draft_many(requests) -> list of DraftTree | None: `draft` for every stream of a
    # step at once, requests being (graph, sid, sample, state) (a drafter that batches its work).
    # Optional: wants_hidden (bool): `draft` gets the stream's `StreamState.hidden`.
