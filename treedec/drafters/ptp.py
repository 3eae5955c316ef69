"""PTP's drafts (Parallel-Token Prediction, arXiv 2603.15206): per stream and step, the
previous step's placeholder guesses as a chain, plus K placeholder nodes
(`treedec.models.placeholders`, ids vocab + j) after the stream's last token and after each
chain node. The placeholders are scratch rows (`DraftTree.scratch`): the accept rule never
keeps them (their ids are no token the model can choose), nothing attends to them, and
their KV is freed with the rejected nodes. The model's tokens at the placeholders after the
last accepted node (or after the stream's last token when none was) are the guesses for
the K tokens after the bonus token: the next step's chain (`observe` reads them from
`Verdict.choices`). A stream not yet seen (a new branch) drafts placeholders only.

Every run drafts with a source of its own, made for the run's model (`for_run`): its placeholders
from `placeholders` (a folder), else from `ptp/` beside the model's checkpoint; never the MTP head."""
from __future__ import annotations

import weakref
from pathlib import Path

from treedec.engine.draft import DraftRequest, DraftTree, StreamState, Verdict
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.placeholders import Placeholders, load_placeholders

PTP_DIR = "ptp"  # beside a checkpoint


class PTPDrafter:
    """A draft source inside the model's forward (`drafts_in_forward`: its `placeholders` rows
    ride in the step, `Strategy.in_forward`): one chain per stream and step."""
    trees, needs_hidden, pages_ahead, drafts_in_forward = False, False, False, True

    def __init__(self, k: int = 6, folder: str | None = None, eos_id: int | None = None):
        if k < 1:
            raise UserError(f"strategy.k (PTP placeholders per anchor) must be at least 1, got {k}")
        self.k, self.folder, self.eos_id = k, folder, eos_id
        self.depth = k
        self.placeholders: Placeholders | None = None  # the engine embeds and adapts their rows (in_forward)
        self._guess = weakref.WeakKeyDictionary()  # page graph -> stream -> (its length then, guessed tokens)

    def for_run(self, vlm) -> "PTPDrafter":
        if vlm.forced or vlm.directory is None and self.folder is None:
            raise UserError("strategy=ptp needs placeholders trained on this checkpoint (a random or forced model "
                            "has none): pass strategy.placeholders=DIR or train them (python -m treedec train "
                            "strategy=ptp)")
        if type(vlm.model).__name__ != "Idefics3ForConditionalGeneration":
            raise UserError(f"strategy=ptp runs on treedec's Idefics3 VLM only (placeholders are trained per "
                            f"checkpoint; none exist for {type(vlm.model).__name__}): use mtp or hpd")
        ph = load_placeholders(Path(self.folder) if self.folder else Path(vlm.directory) / PTP_DIR, vlm.model)
        if ph.cfg.k < self.k:
            raise UserError(f"strategy.k={self.k} but the placeholders were trained for {ph.cfg.k}")
        run = PTPDrafter(self.k, self.folder, self.eos_id)
        run.placeholders = ph
        return run

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        if self.placeholders is None:
            raise RuntimeError("a PTP drafter drafts only as a run's source: strategy.for_run(vlm) (its placeholders "
                               "loaded)")
        n, guess = self._guess.get(graph, {}).get(sid, (-1, []))
        chain = guess[:self.k] if n == len(graph[sid].tokens) and graph[sid].tokens[-1] != self.eos_id else []
        if self.eos_id in chain:  # nothing follows an end
            chain = chain[:chain.index(self.eos_id) + 1]
        tokens, parents = list(chain), list(range(-1, len(chain) - 1))
        vocab = self.placeholders.cfg.vocab
        for anchor in range(-1, len(chain)):
            tokens += [vocab + j for j in range(self.k)]
            parents += [anchor] + list(range(len(parents), len(parents) + self.k - 1))
        return DraftTree(tokens, parents, scratch=(len(chain) + 1) * self.k)

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return [self.propose(*r) for r in requests]

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        """Keep the guesses of the placeholders after the last accepted node for the next step."""
        real = len(tree) - tree.scratch
        anchor = verdict.nodes[-1] if verdict.nodes else -1
        first = real + (anchor + 1) * self.k  # anchors in order: -1, then the chain's nodes
        guess = verdict.choices[1 + first:1 + first + self.k]
        self._guess.setdefault(graph, {})[sid] = (len(graph[sid].tokens) + len(verdict.tokens), guess)
