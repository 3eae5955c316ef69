"""A strategy = serialization form + fork rule (+ drafter and acceptor, later), composed,
never subclassed. It implements the engine's `Policy` and assembles the page."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from treedec.engine.policy import Fork
from treedec.graph import DecodingGraph
from treedec.registry import Registry
from treedec.tokenizer import Tokenizer

ForkRule = Callable[[DecodingGraph, int, int, Tokenizer], list[Fork]]
"""(graph, stream, index of its new token, tokenizer) -> forks to start."""

STRATEGIES: Registry[Callable[..., "Strategy"]] = Registry("strategy", "treedec.strategies", "treedec.strategies")
FORK_RULES: Registry[ForkRule] = Registry("fork rule", "treedec.fork_rules", "treedec.strategies")


@dataclass
class Strategy:
    name: str
    form: str  # "flat" (one stream) or "tree" (layout stream + branches)
    tokenizer: Tokenizer
    fork_rule: ForkRule | None = None

    def __post_init__(self):
        if self.form not in ("flat", "tree"):
            raise ValueError(f"form must be flat or tree, got {self.form!r}")

    # --- the engine's Policy
    def forks(self, graph: DecodingGraph, sid: int, index: int) -> list[Fork]:
        return self.fork_rule(graph, sid, index, self.tokenizer) if self.fork_rule else []

    def is_end(self, graph: DecodingGraph, sid: int, token: int) -> bool:
        return token == self.tokenizer.eos_id

    # --- output
    def flat_text(self, graph: DecodingGraph) -> str:
        """The page in flat form: every branch spliced in place of its fork token, its own
        `<eos>` dropped (nested branches too)."""
        return self.tokenizer.decode(graph.flatten(drop_tail=[self.tokenizer.eos_id]))
