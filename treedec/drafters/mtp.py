"""HPD's P-MTP drafts: per stream, a K-token chain from the MTP head (`treedec.models.mtp_head`)
run on the stream's hidden state (`StreamState.hidden`) and its last token (with `top` > 1,
the head's `top` likeliest first tokens side by side, each continued greedily: a draft
tree, treedec's option). A stream without a hidden state yet (a branch before its first
forward) proposes nothing.

Every run drafts with a source of its own, made for the run's model (`for_run`, as every draft
source is), its head loaded from `head` (a folder), else from `mtp/` beside the model's checkpoint."""
from __future__ import annotations

from pathlib import Path

import torch

from treedec.engine.draft import DraftRequest, DraftTree, StreamState, Verdict
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.mtp_head import MTPDraftModel, load_head

HEAD_DIR = "mtp"  # beside a checkpoint


def default_head_dir(vlm) -> Path | None:
    return Path(vlm.directory) / HEAD_DIR if vlm.directory is not None else None


class MTPDrafter:
    """A draft source on the hidden state (`needs_hidden`): chains (`top` = 1) or a tree of
    `top` chains, K deep."""
    needs_hidden, pages_ahead, drafts_in_forward = True, False, False

    def __init__(self, k: int = 6, head: str | None = None, eos_id: int | None = None, top: int = 1):
        if k < 1:
            raise UserError(f"strategy.k (MTP look-ahead depth) must be at least 1, got {k}")
        if top < 1:
            raise UserError(f"strategy.top (MTP first-token alternatives) must be at least 1, got {top}")
        self.k, self.head_dir, self.eos_id, self.top = k, head, eos_id, top
        self.trees, self.depth = top > 1, k
        self.model: MTPDraftModel | None = None

    def head_folder(self, vlm) -> Path | None:
        """The head's folder: `head`, else `mtp/` beside the model's checkpoint (None: neither)."""
        return Path(self.head_dir) if self.head_dir else default_head_dir(vlm)

    def head(self, vlm) -> MTPDraftModel:
        """The draft model on `vlm`'s hidden state (this run's; loaded for `vlm` if this is no run's source)."""
        return self.model if self.model is not None else self._load(vlm)

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        pass

    def for_run(self, vlm) -> "MTPDrafter":
        run = MTPDrafter(self.k, self.head_dir, self.eos_id, self.top)
        run.model = self._load(vlm)
        return run

    def _load(self, vlm) -> MTPDraftModel:
        if vlm.forced:
            raise UserError("strategy=mtp/hpd cannot run on model=forced: no MTP head is trained for a random-weight "
                            "forced model (its acceptance would be a guess)")
        d = self.head_folder(vlm)
        if d is None:
            raise UserError("MTP drafting needs a head: this model has no checkpoint folder to find one beside; "
                            "pass strategy.head=DIR")
        head = load_head(d, vlm.model)
        if head.cfg.k < self.k:
            raise UserError(f"strategy.k={self.k} but the MTP head at {d} was trained for {head.cfg.k} depths")
        return MTPDraftModel.of(head, vlm.model)

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        return self.propose_many([(graph, sid, sample, state)])[0]

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        """`propose` for every stream of an engine step at once: one batched head pass per
        depth over the streams, not K small passes per stream (docs/results.md, HPD)."""
        if self.model is None:
            raise RuntimeError("an MTP drafter drafts only as a run's source: strategy.for_run(vlm) (its head loaded)")
        out: list[DraftTree | None] = [None] * len(requests)
        ready = [i for i, (_, _, _, st) in enumerate(requests) if st is not None and st.hidden is not None]
        if not ready:
            return out
        hidden = torch.stack([requests[i][3].hidden for i in ready])
        last = [requests[i][0][requests[i][1]].tokens[-1] for i in ready]
        for i, chains in zip(ready, self.model.chains_many(hidden, last, self.k, self.top)):
            tokens, parents = [], []
            for chain in chains:
                if self.eos_id in chain:  # nothing follows an end
                    chain = chain[:chain.index(self.eos_id) + 1]
                parents += [-1] + list(range(len(tokens), len(tokens) + len(chain) - 1))
                tokens += chain
            out[i] = DraftTree(tokens, parents)
        return out
