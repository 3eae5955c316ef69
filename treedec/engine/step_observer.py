"""What watches the engine's passes without steering them: each step's batch and each prefill
are handed to a `StepObserver` once, after the fact. It keeps the attention's padding waste
(`AttentionStats`, always) and, where the run hands one, the cost model's `ForwardLog`."""
from __future__ import annotations

from dataclasses import dataclass, field

from treedec.engine.forward_log import ForwardLog
from treedec.engine.step_attention import AttentionStats
from treedec.engine.step_batch import StepBatch


@dataclass
class StepObserver:
    log: ForwardLog | None = None  # every prefill and step added to it (treedec.results.cost_model); None: not recorded
    attention: AttentionStats = field(default_factory=AttentionStats)

    def prefill(self, tokens: int, forward: tuple[float, float], admit_s: float) -> None:
        if self.log is not None:
            self.log.add_prefill(tokens, forward, admit_s)

    def step(self, batch: StepBatch, pages: int, step_s: float) -> None:
        """A step done: `pages` of them had work; `step_s`: the whole step's seconds."""
        self.attention.add(batch.real, batch.attn, batch.buckets)
        if self.log is not None:
            self.log.add_step(pages, batch.rows, batch.attn, batch.forward, step_s, batch.blocked)
