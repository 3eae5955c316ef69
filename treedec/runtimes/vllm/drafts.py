"""HSD's page drafts on stock vLLM: a `speculative_config` `custom_class` proposer that
serves them as linear chains.

vLLM 0.32 verifies one draft chain per request (no token trees), and a `custom_class`
proposer is built inside the engine core from `VllmConfig` alone, then called every step
with the batch's token ids only (`sampled_token_ids`, `num_tokens_no_spec`,
`token_ids_cpu`): no request ids, no page state. So the pages' drafts reach it through a
**draft store**, a JSON file whose path is in `$TREEDEC_VLLM_DRAFTS` when the engine is
created (`treedec.runtimes.vllm.engine.VLLMEngines.engine`: one store file per engine, fixed for the
engine's life). The runner rewrites the file's content for every run (atomically:
`os.replace`); the proposer reloads it when its inode, mtime or size changes.

What the proposer does per request that sampled a token this step: HSD's n-gram match
(`NgramMatcher.matches` semantics: the context's last w tokens, w from `w_min` growing to
`w_max` while several draft places match) over every stored draft sequence, then it
proposes what follows ONE match, at most `num_speculative_tokens` tokens. Several matches
agreeing on the last w tokens: the one whose draft agrees with the context furthest back
(up to `LOOKBACK` tokens), the first stored on a tie; so a page's own draft wins once the
request has written a few tokens of it. Acceptance is vLLM's rejection sampler, exact at
temperature 0: the pages equal the base strategy's whatever the drafts.

The context a proposer sees is the request's whole prompt + output (the image prompt
expanded, a branch's prompt = its ancestors); the stored sequences are laid out so that
the n-gram match finds the right continuation where the embedded drafter
(`PageDraftDrafter`) would propose it:
- root stream (the flat stream of `hsd`, the layout stream of `padoc_hsd`): the prompt's
  last `w_max` tokens + the draft page's flat form / tree-form layout, so the draft is
  proposed from the first step;
- content branches (`padoc_hsd`): per draft region `<BLOCK><|cat|>[box]<CHILD>content<eos>`,
  which is how a branch's context ends (its `<CHILD>` replaces the layout's `<FORK>`), so a
  branch whose box the draft has finds its region's content from its first token.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from treedec.drafters.ngram import NgramIndex

ENV_STORE = "TREEDEC_VLLM_DRAFTS"
PROPOSER = f"{__name__}.PageDraftProposer"
LOOKBACK = 256  # context tokens the proposer looks at (tie-break among equally long matches)


# ---------------------------------------------------------------------- matching
class DraftIndex(NgramIndex):
    """HSD's n-gram match over the stored drafts (`treedec.drafters.ngram.NgramIndex`) and
    the one chain vLLM can verify: among several matches, the draft that agrees with the
    context furthest back."""

    def agreement(self, history: list[int], d: int, j: int) -> int:
        """How many tokens `history` and draft `d` before index `j` agree on, backwards."""
        seq, n = self.drafts[d], 0
        top = min(len(history), j)
        while n < top and history[-1 - n] == seq[j - 1 - n]:
            n += 1
        return n

    def propose(self, history: list[int], k: int) -> list[int]:
        """The continuation (<= k tokens) of one match of `history`'s suffix; [] when none."""
        if k <= 0:
            return []
        found = [(d, j) for d, j in self.matches(history) if j < len(self.drafts[d])]
        if not found:
            return []
        if len(found) > 1:  # max() keeps the first of equals: store order, then position
            found = [max(found, key=lambda m: self.agreement(history, *m))]
        d, j = found[0]
        return self.drafts[d][j:j + k]


# ---------------------------------------------------------------------- the store
class DraftStore:
    """The runner's side: writes the drafts of a run where the engine's proposer reads them."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def write(self, drafts: list[list[int]], w_min: int, w_max: int) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"w_min": int(w_min), "w_max": int(w_max),
                                   "drafts": [[int(t) for t in d] for d in drafts]}))
        os.replace(tmp, self.path)  # a new inode: the proposer sees the change whatever the mtime resolution

    def clear(self) -> None:
        self.write([], 1, 1)

    def read(self) -> DraftIndex:
        data = json.loads(self.path.read_text())
        return DraftIndex(data["drafts"], int(data["w_min"]), int(data["w_max"]))


# ---------------------------------------------------------------------- the proposer
class PageDraftProposer:
    """`speculative_config={"method": "custom_class", "model": PROPOSER, ...}`: vLLM builds it
    with its `VllmConfig` in the engine core (every worker under tensor parallelism), calls
    `load_model` (the CPU runner calls it unconditionally) and then `propose` after each
    step's bookkeeping."""

    def __init__(self, vllm_config: Any):
        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(vllm_config.model_config.max_model_len)
        path = os.environ.get(ENV_STORE)
        self.store = DraftStore(path) if path else None
        self.index: DraftIndex | None = None
        self._stamp: tuple | None = None
        self.proposed = 0  # draft tokens handed to vLLM (this process)

    def load_model(self, *args, **kwargs) -> None:  # no draft model
        pass

    def _refresh(self) -> DraftIndex | None:
        if self.store is None:
            return None
        try:
            st = os.stat(self.store.path)
        except OSError:
            self.index, self._stamp = None, None
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                self.index = self.store.read()
            except (OSError, ValueError, KeyError, TypeError):
                self.index = None  # unreadable: no drafts (never wrong pages, only slower)
            self._stamp = stamp
        return self.index

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec, token_ids_cpu,
                slot_mappings=None, **kwargs) -> list[list[int]]:
        index = self._refresh()
        out: list[list[int]] = []
        for i, sampled in enumerate(sampled_token_ids):
            n = int(num_tokens_no_spec[i])
            k = min(self.k, self.max_model_len - n)
            if index is None or not index.drafts or not sampled or k <= 0:
                out.append([])
                continue
            history = token_ids_cpu[i, max(0, n - LOOKBACK):n].tolist()
            draft = index.propose(history, k)
            self.proposed += len(draft)
            out.append(draft)
        return out
