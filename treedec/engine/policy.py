"""What the engine asks of a decoding strategy (it never knows one by name)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from treedec.engine.draft import DraftRequest, DraftTree, Verdict
from treedec.graph import DecodingGraph


@dataclass(frozen=True)
class Fork:
    """Start a child of `parent` seeing its tokens [0, at), beginning with `first`."""
    parent: int
    at: int
    first: tuple[int, ...]
    label: str = ""


class Policy(Protocol):
    needs_hidden: bool  # `draft_many` gets each stream's `StreamState.hidden` (its draft source's `needs_hidden`)
    in_forward: object | None  # rows its draft source adds to the model's forward (`drafts_in_forward`), or None

    def forks(self, graph: DecodingGraph, sid: int, index: int) -> list[Fork]:
        """Forks caused by token `index` of stream `sid`, just produced."""

    def is_end(self, graph: DecodingGraph, sid: int, token: int) -> bool:
        """Does `token` end stream `sid`?"""

    def draft_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        """Per request `(graph, sid, sample, state)` (every stream of a step, asked at once: a
        drafter may batch its work), a draft tree continuing stream `sid`, or None (no speculation)."""

    def accept(self, tree: DraftTree, choices: list[int], logits) -> Verdict:
        """Which draft nodes to keep, given the model's (greedy) token after the stream's last
        token and after each draft node, and those rows' logits [1 + len(tree), V]."""

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        """Told every verdict on a draft (e.g. treedec.engine.draft_length.AdaptiveLength
        adapts its proposals' depth)."""

    # Under a forced model (`treedec.models.forced`), also: tokenizer, and target(page, tokenizer, prompt ids) ->
    # the page's ground truth as a DecodingGraph (`treedec.engine.forced`).
