"""The draft / verify contract every drafter shares (pipeline n-grams, MTP heads, prompt
lookup): a drafter proposes a token tree for a stream; one forward scores the stream's
pending token and every draft node under the ancestor mask; an acceptor keeps the
longest path the model agrees with plus one bonus token."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from treedec.graph import DecodingGraph


@dataclass
class DraftTree:
    """Draft nodes in topological order: `tokens[i]` continues node `parents[i]`
    (-1 = the stream's last token, i.e. the root of the tree). The last `scratch` nodes are
    rows the drafter reads itself (PTP's placeholders): never accepted, not counted as drafts."""
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    scratch: int = 0

    def __post_init__(self):
        if len(self.tokens) != len(self.parents):
            raise ValueError("a draft tree needs one parent per token")
        for i, p in enumerate(self.parents):
            if not -1 <= p < i:
                raise ValueError(f"draft node {i} has parent {p}; parents must come first")

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def chain(cls, tokens: list[int]) -> "DraftTree":
        return cls(list(tokens), list(range(-1, len(tokens) - 1)))

    def depths(self) -> list[int]:
        d: list[int] = []
        for p in self.parents:
            d.append(1 if p < 0 else d[p] + 1)
        return d

    def path(self, node: int) -> list[int]:
        """Nodes from the root down to `node`."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def ancestor_mask(self) -> torch.Tensor:
        """[n, n] bool: node i sees node j (j on i's path, i included) — built by copying
        the parent's row (Medusa/EAGLE style)."""
        n = len(self.tokens)
        m = torch.zeros(n, n, dtype=torch.bool)
        for i, p in enumerate(self.parents):
            if p >= 0:
                m[i] = m[p]
            m[i, i] = True
        return m


@dataclass
class StreamState:
    """What the runtime knows of a stream beyond its tokens, handed to every drafter.

    `hidden` [H]: the base model's last-layer hidden state (what its LM head read) at the
    row whose logits chose the stream's last token: the last verified token, an accepted
    draft node when a draft was accepted. None where the runtime has none (a branch before
    its first forward, a runtime that does not read hidden states, a policy that did not
    ask for them: `DraftSource.needs_hidden`)."""
    hidden: torch.Tensor | None = None


DraftRequest = tuple[DecodingGraph, int, object, StreamState | None]
"""(page graph, stream id, the page's sample, its StreamState): one stream to draft for."""


class DraftSource(Protocol):
    """A source of drafts (pipeline n-grams, MTP heads, ...), its capabilities declared as
    fields that the engine and both runtimes read (never probe): treedec/drafters/README.md.

    A strategy holds its source as a factory of sources: every run drafts with one made for it
    (`for_run`), so nothing a source learns in one run (drafts handed to it, verdicts seen)
    reaches another, and the fields tell the runtimes what the run's source will do before it
    is made.

    Besides these, a source with `pages_ahead` offers `use(name, drafts...)` (a page's drafts,
    handed to the run's source before the page is decoded: what they are is the source's own),
    `matcher` (the `NgramMatcher` its drafts
    are matched with), `sequences(names, prompt_ids)` (every draft token sequence of those
    pages, a root sequence headed by the prompt's last `matcher.w_max` tokens) and `step_only`
    (what of it only a step-level drafter does, one line each: a runtime serving its
    `sequences` through its own proposer says so); a source with `needs_hidden` that vLLM
    serves offers `head(vlm)` (its draft model on the hidden state) and `head_folder(vlm)`; a
    source with `drafts_in_forward` offers `placeholders` (PTP's: the rows' embeddings and their
    row-only adapters, `treedec.models.placeholders`), the last `DraftTree.scratch` nodes of its
    trees being those rows."""

    trees: bool  # may propose branching token trees; False: one chain per stream and step
    needs_hidden: bool  # reads `StreamState.hidden`: the runtime computes each stream's last hidden state
    pages_ahead: bool  # knows a page's drafts before it is decoded (drafted whole pages ahead: `sequences`)
    depth: int  # the most tokens deep it drafts in one step
    drafts_in_forward: bool  # adds rows of its own to the model's forward (`placeholders`, embedded by the adapter)

    def for_run(self, vlm) -> "DraftSource":
        """A source of the same kind and options for one run on `vlm`: no drafts, nothing seen, bound
        to the model (MTP: its head loaded; PTP: its placeholders). A source that needs the model
        drafts only as such a run's source."""

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        """Per request, a draft tree continuing the stream (after its last token), or None;
        every stream of a step asked at once (a source may batch its work)."""

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        """Told every verdict on a draft it proposed (a source that adapts; else nothing)."""


@dataclass
class Verdict:
    nodes: list[int]  # accepted draft nodes, root to leaf
    tokens: list[int]  # their tokens followed by the bonus token
    choices: list[int] = field(default_factory=list)  # the model's token after the last token and each node


def _children(tree: DraftTree) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for i, (t, p) in enumerate(zip(tree.tokens, tree.parents)):
        out.setdefault(p, {}).setdefault(t, i)
    return out


def accept_greedy(tree: DraftTree, choices: list[int], logits=None) -> Verdict:
    """Exact greedy acceptance (lossless). `choices[0]` is the model's token after the
    stream's last token, `choices[1 + i]` its token after draft node i. Walk down while a
    child of the current node carries the model's token; the model's token at the stop is
    the bonus."""
    children = _children(tree)
    node, nodes = -1, []
    while True:
        want = choices[node + 1]
        nxt = children.get(node, {}).get(want)
        if nxt is None:
            return Verdict(nodes, [tree.tokens[i] for i in nodes] + [want])
        nodes.append(nxt)
        node = nxt


def relaxed(threshold: float):
    """HSD's relaxed acceptance (LOSSY): also accept a draft token the model gives at least
    `threshold` probability, when it is not the model's own choice. threshold >= 1 is exact."""

    def accept(tree: DraftTree, choices: list[int], logits: torch.Tensor) -> Verdict:
        children = _children(tree)
        probs = torch.softmax(logits.float(), -1)
        node, nodes = -1, []
        while True:
            kids = children.get(node, {})
            want = choices[node + 1]
            nxt = kids.get(want)
            if nxt is None and kids:
                tok, best = max(kids.items(), key=lambda kv: float(probs[node + 1, kv[0]]))
                if float(probs[node + 1, tok]) >= threshold:
                    nxt = best
            if nxt is None:
                return Verdict(nodes, [tree.tokens[i] for i in nodes] + [want])
            nodes.append(nxt)
            node = nxt

    return accept
