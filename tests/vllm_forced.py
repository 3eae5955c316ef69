"""A forced page tree on both runtimes, so that a tiny random replica in treedec's format forks
(`padoc`) and closes regions (`crops`' layout pass) the same way on the embedded engine and on
vLLM. The plan is `engine_helpers.ForcedTree`'s (a function of the visible context only: the
model still picks every letter), applied to a stream's context after the page's prompt; a
crop's read (mode `crop`) is `crop_len` letters then `<eos>`; any other mode is left free.

- embedded: `ForcedEmbedded`, the embedded runtime with the plan as the engine's logits
  processor (the runtime takes none: a test's own);
- vLLM: `ForcedLogits`, a vLLM logits processor (`vllm.v1.sample.logits_processor`) applying
  the plan set by `use_plan` before its engine starts (the engine runs in this process).
  vLLM refuses custom logits processors beside speculative decoding, so it is an engine of
  its own."""
from __future__ import annotations

from dataclasses import replace

import torch

from treedec.engine.engine import Engine
from treedec.models.vlm import MODES
from treedec.runtimes.embedded import EmbeddedRuntime

from engine_helpers import ForcedTree


class ForcedByPrompt(ForcedTree):
    """`ForcedTree` whose prompt is found in each context: it ends `len(tail)` tokens after its
    mode's token (`tail`: what the chat template writes after it, the same for every mode)."""

    def __init__(self, tok, tail: list[int], blocks: int, lengths: list[int], boxes: list[str], crop_len: int):
        super().__init__(0, blocks, lengths, boxes=boxes, tok=tok)
        self.tail, self.crop_len = list(tail), crop_len
        self.tree, self.crop = tok.vocab[MODES["tree"]], tok.vocab[MODES["crop"]]
        self.modes = {tok.vocab[m] for m in MODES.values() if m in tok.vocab}

    def allowed(self, ctx: list[int]) -> list[int] | None:
        """The tokens allowed next after `ctx`; None: any (the prompt's mode, its first mode token, is another)."""
        end = next((i + 1 for i, t in enumerate(ctx) if t in self.modes), None)
        if end is None or ctx[end - 1] not in (self.tree, self.crop):
            return None
        assert ctx[end:end + len(self.tail)] == self.tail, "the prompt's tail follows its mode token"
        gen = ctx[end + len(self.tail):]
        if ctx[end - 1] == self.crop:
            return self.letters if len(gen) < self.crop_len else [self.tok.eos_id]
        return self._plan(gen)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = scores.clone()
        for b in range(input_ids.shape[0]):
            allowed = self.allowed(input_ids[b].tolist())
            if allowed is not None:
                out[b] = float("-inf")
                out[b, allowed] = scores[b, allowed]
        return out


def forced_plan(vlm, blocks: int, lengths: list[int], boxes: list[str], crop_len: int) -> ForcedByPrompt:
    """The plan for `vlm` (a replica in treedec's format): the tail of its prompts read from its
    chat-template prompt."""
    tok = vlm.tokenizer
    ids = tok.encode(vlm.prompt_text("tree"))
    tail = ids[ids.index(tok.vocab[MODES["tree"]]) + 1:]
    crop = tok.encode(vlm.prompt_text("crop"))
    assert crop[crop.index(tok.vocab[MODES["crop"]]) + 1:] == tail
    return ForcedByPrompt(tok, tail, blocks, lengths, boxes, crop_len)


class ForcedEmbedded(EmbeddedRuntime):
    """The embedded runtime with `plan` as its engine's logits processor."""

    def __init__(self, cfg, plan: ForcedByPrompt):
        super().__init__(cfg)
        self.plan = plan

    def decode(self, vlm, strategy, items, in_flight=None, log=None):
        cfg = replace(self.cfg, max_pages=in_flight) if in_flight else self.cfg
        engine = Engine(vlm.adapter(), strategy, cfg, [self.plan], log=log)
        try:
            yield from engine.run(items)
        finally:
            self.forward_passes += engine.forward_passes
            self._engine = engine


_PLAN: list[ForcedByPrompt] = []  # the plan the next ForcedLogits built takes


def use_plan(plan: ForcedByPrompt) -> None:
    """The plan of the vLLM engine started next (its `ForcedLogits` reads it when built)."""
    _PLAN[:] = [plan]


def forced_logits_class():
    """`ForcedLogits`, defined when vLLM is importable."""
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

    class ForcedLogits(LogitsProcessor):
        """`ForcedByPrompt`'s plan on every request of the engine (prompt ids as vLLM expanded
        them + the request's output so far, a live reference vLLM keeps up to date)."""

        def __init__(self, vllm_config, device, is_pin_memory):
            self.plan = _PLAN[0]
            self.rows: dict[int, tuple[list[int], list[int]]] = {}

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            if batch_update is None:
                return
            for i in batch_update.removed:
                self.rows.pop(i, None)
            for i, _params, prompt, output in batch_update.added:
                self.rows[i] = (list(prompt or []), output)
            for a, b, direction in batch_update.moved:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if rb is not None and direction.name == "SWAP":
                    self.rows[a] = rb

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            for i, (prompt, output) in self.rows.items():
                if i >= logits.shape[0]:
                    continue
                allowed = self.plan.allowed(prompt + list(output))
                if allowed is not None:
                    keep = logits[i, allowed].clone()
                    logits[i] = float("-inf")
                    logits[i, allowed] = keep
            return logits

    return ForcedLogits
