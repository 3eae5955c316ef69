"""Lossless checks that cannot pass vacuously: decode with and without drafts and compare
every stream's token ids, and make sure drafts were proposed, some accepted and some
rejected (`assert_lossless`). On random models the structure is forced (`ForcedTree`,
`ForcedRows`: the model still picks every box digit and letter), so tree forms fork and
their drafts can land; HSD's drafts are the plain run's own page, corrupted (`own_drafts`);
MTP's head is fitted briefly on the plain run's own hidden states (`fitted_head`)."""
from __future__ import annotations

import copy
from dataclasses import replace
from types import SimpleNamespace

import torch

from treedec.engine.engine import Engine, EngineConfig
from treedec.engine.page_decoding import PageDecoding
from treedec.engine.draft import StreamState
from treedec.models.mtp_head import MTPConfig, save_head
from treedec.models.tied_weights import base_hash
from treedec.strategies.base import Strategy
from treedec.training.mtp import IGNORE, Rows, train_head


def decode(vlm, strategy: Strategy, samples, ecfg: EngineConfig, procs=()) -> dict[str, PageDecoding]:
    """The pages decoded by the engine with logits processors `procs` (no runtime takes
    them): every page's result by name; the arena empty afterwards."""
    items = [(s.name, vlm.prompt(s.image, strategy.mode), s) for s in samples]
    engine = Engine(vlm.adapter(), strategy, ecfg, procs)
    out = {r.name: r for r in engine.run(items)}
    assert engine.arena.used == 0
    return out


def assert_lossless(plain: dict[str, PageDecoding], spec: dict[str, PageDecoding]) -> tuple[int, int]:
    """Token for token (ids, every stream, streams by their place in the tree: a nested fork
    may start earlier with drafts, so stream ids may be numbered in another order) the same
    pages, drafts proposed and both accepted and rejected (drafted > accepted > 0):
    (drafted, accepted)."""
    assert spec.keys() == plain.keys()
    for n, r in plain.items():
        assert streams(spec[n].graph) == streams(r.graph), n
    drafted, accepted = sum(r.drafted for r in spec.values()), sum(r.accepted for r in spec.values())
    assert drafted > accepted > 0, (drafted, accepted)
    return drafted, accepted


def streams(graph) -> dict[str, tuple]:
    """Every stream by its label (its path in the tree: `root/1/2`, `block 3`): its parent's
    label, where it forks from it, its token ids."""
    out = {s.label: (None if s.parent is None else graph[s.parent].label, s.fork_at, s.tokens) for s in graph.streams}
    assert len(out) == len(graph), "labels name the streams one to one"
    return out


def corrupted(page, every: int = 4):
    """A copy of `page` with every `every`-th character of each block's content changed."""
    page = copy.deepcopy(page)
    for b in page.blocks:
        b.content = "".join(chr(ord(c) + 1) if i % every == every - 1 else c for i, c in enumerate(b.content))
    return page


def own_drafts(samples, plain: dict[str, PageDecoding], strategy: Strategy):
    """Copies of `samples` whose page (what `drafts=oracle` drafts from) is the plain run's own
    output parsed, every 4th content character changed: never the ground truth."""
    out = []
    for s in samples:
        s = copy.copy(s)
        own = strategy.format.parse(strategy.flat_text(plain[s.name].graph), *s.image.size).page
        assert own.blocks and all(b.content for b in own.blocks), strategy.flat_text(plain[s.name].graph)
        s.page = corrupted(own)
        out.append(s)
    return out


class HiddenRecorder:
    """A drafter that proposes nothing and records each stream's hidden state with the
    stream's length when asked: (graph, sid, tokens so far, hidden)."""
    trees, needs_hidden, pages_ahead, depth, drafts_in_forward = False, True, False, 0, False

    def __init__(self):
        self.seen: list[tuple[object, int, int, torch.Tensor]] = []

    def for_run(self, vlm) -> "HiddenRecorder":
        return self  # records across runs

    def propose_many(self, requests: list) -> list:
        for graph, sid, _, state in requests:
            if isinstance(state, StreamState) and state.hidden is not None:
                self.seen.append((graph, sid, len(graph[sid].tokens), state.hidden.float().clone()))
        return [None] * len(requests)

    def observe(self, graph, sid, sample, tree, verdict) -> None:
        pass


def own_rows(vlm, bases: dict, samples, ecfg: EngineConfig, k: int) -> Rows:
    """MTP training rows from the model's own output on `samples` in each of `bases`' forms
    (`{name: (strategy, logits processors)}`): per step of every stream, its hidden state and
    the stream's next tokens, the one it chose first (as `collect_rows`)."""
    hidden, windows = [], []
    for strategy, procs in bases.values():
        rec = HiddenRecorder()
        decode(vlm, replace(strategy, drafter=rec), samples, ecfg, procs)
        for graph, sid, n, h in rec.seen:
            w = graph[sid].tokens[n - 1:n + k]
            hidden.append(h)
            windows.append(w + [IGNORE] * (k + 1 - len(w)))
    return Rows(torch.stack(hidden), torch.tensor(windows))


def fitted_head(vlm, bases: dict, samples, ecfg: EngineConfig, folder, k: int = 3) -> str:
    """A real MTP head fitted briefly (`train_head`) on the model's own output (`own_rows`),
    saved in `folder` bound to the model (`strategy.head=folder`): on other pages its chains
    are partly right, so drafts are both accepted and rejected."""
    rows = own_rows(vlm, bases, samples, ecfg, k)
    head, _ = train_head(SimpleNamespace(model=vlm.model), rows, MTPConfig(hidden=rows.hidden.shape[1], k=k),
                         steps=200, lr=3e-3, batch=64, progress=False)
    save_head(head, folder, base_hash(vlm.model))
    return str(folder)


class VerdictSpy:
    """Installed as a composed drafter's `observe` (`FirstOf` routes each verdict to the
    drafter that proposed): the accepted depth of every draft that drafter made."""

    def __init__(self, drafter):
        self.accepted: list[int] = []
        drafter.observe = self

    def __call__(self, graph, sid, sample, tree, verdict) -> None:
        self.accepted.append(len(verdict.nodes))


def fitted_placeholders(vlm, runs: dict[str, PageDecoding], samples, folder, k: int = 3, steps: int = 150) -> str:
    """PTP placeholders fitted briefly (`treedec.training.ptp.train`) on the model's own output
    (`runs`: decoded `samples`), saved in `folder` bound to the model (`strategy.placeholders`):
    on other pages their guesses are partly right, so drafts are both accepted and rejected."""
    from treedec.models.placeholders import Placeholders, PTPConfig, decoder_linears, save_placeholders
    from treedec.training.ptp import graph_kv, train

    pages = [graph_kv(vlm, runs[s.name].graph, s.image) for s in samples]
    text = vlm.model.config.text_config
    ph = Placeholders(PTPConfig(text.hidden_size, text.vocab_size, k), decoder_linears(vlm.model))
    train(vlm, pages, ph, steps, 1e-2, 32, 0, progress=False)
    save_placeholders(ph, folder, base_hash(vlm.model))
    return str(folder)
