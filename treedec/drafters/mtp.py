"""HPD's P-MTP drafts: per stream, a K-token chain from the MTP head (`treedec.models.mtp_head`)
run on the stream's hidden state (`StreamState.hidden`) and its last token (with `top` > 1,
the head's `top` likeliest first tokens side by side, each continued greedily: a draft
tree, treedec's option). A stream without a hidden state yet (a branch before its first
forward) proposes nothing.

The head is bound to the base model before decoding (`bind`, the strategy's `prepare`):
from `head` (a folder), else from `mtp/` beside the model's checkpoint."""
from __future__ import annotations

from pathlib import Path

from treedec.engine.draft import DraftTree, StreamState
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.mtp_head import MTPDraftModel, load_head

HEAD_DIR = "mtp"  # beside a checkpoint


def default_head_dir(vlm) -> Path | None:
    d = getattr(vlm, "directory", None)
    return Path(d) / HEAD_DIR if d is not None else None


class MTPDrafter:
    wants_hidden = True

    def __init__(self, k: int = 6, head: str | None = None, eos_id: int | None = None, top: int = 1):
        if k < 1:
            raise UserError(f"strategy.k (MTP look-ahead depth) must be at least 1, got {k}")
        if top < 1:
            raise UserError(f"strategy.top (MTP first-token alternatives) must be at least 1, got {top}")
        self.k, self.head_dir, self.eos_id, self.top = k, head, eos_id, top
        self.model: MTPDraftModel | None = None

    def bind(self, vlm) -> None:
        d = Path(self.head_dir) if self.head_dir else default_head_dir(vlm)
        if d is None:
            raise UserError("MTP drafting needs a head: this model has no checkpoint folder to find one beside; "
                            "pass strategy.head=DIR")
        head = load_head(d, vlm.model)
        if head.cfg.k < self.k:
            raise UserError(f"strategy.k={self.k} but the MTP head at {d} was trained for {head.cfg.k} depths")
        self.model = MTPDraftModel.of(head, vlm.model)

    def __call__(self, vlm, samples, engine_cfg, progress: bool = True) -> dict[str, dict]:
        """The strategy's `prepare`: bind the head to the model about to decode."""
        self.bind(vlm)
        return {}

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        if self.model is None or state is None or state.hidden is None:
            return None
        tokens, parents = [], []
        for chain in self.model.chains(state.hidden, graph[sid].tokens[-1], self.k, self.top):
            if self.eos_id in chain:  # nothing follows an end
                chain = chain[:chain.index(self.eos_id) + 1]
            parents += [-1] + list(range(len(tokens), len(tokens) + len(chain) - 1))
            tokens += chain
        return DraftTree(tokens, parents)
