"""`runtime=embedded` (the default): treedec's own engine (`treedec.engine`) as a runtime
(`treedec.runtimes.base.Runtime`), and its config."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator

from treedec.data.sample import Sample
from treedec.engine.engine import Engine, EngineConfig
from treedec.engine.page_decoding import PageDecoding
from treedec.engine.forward_log import ForwardLog
from treedec.records import RunResult
from treedec.run.parse_pages import parse_pages
from treedec.runtimes.base import config_from
from treedec.strategies.base import Strategy


@dataclass
class EmbeddedConfig(EngineConfig):
    """`runtime=embedded` (treedec/conf/runtime/embedded.yaml): the engine's config, plus the
    torch threads of the process."""
    threads: int = 2
    name: str = "embedded"


class EmbeddedRuntime:
    """`runtime=embedded`: treedec's engine (`treedec.engine`), one flat forward per step over
    every live stream of every page in flight. It runs every strategy as it is asked."""

    name = "embedded"
    pending_inputs = True  # the engine steps its pages while the next is being drafted
    steps_counted = "forward passes in which the page had tokens in the batch (its prompt's prefill: one forward)"

    def __init__(self, cfg: EngineConfig | None = None):
        self.cfg = cfg or EngineConfig()
        self.forward_passes = 0
        self._engine: Engine | None = None

    @classmethod
    def from_cfg(cls, cfg: Any) -> "EmbeddedRuntime":
        return cls(config_from(EmbeddedConfig, cfg, "runtime=embedded"))

    def check(self, vlm, strategy: Strategy) -> None:
        pass

    def notes(self, strategy: Strategy) -> list[str]:
        return []

    def prepare(self, vlm, strategy: Strategy, samples: Iterable[Sample]) -> Iterable[Sample]:
        return samples  # the engine asks the strategy's draft source step by step

    def prompt(self, vlm, strategy: Strategy, sample: Sample):
        return vlm.prompt(sample.image, strategy.mode, sample.category)  # a crop: its region's category's prompt

    def decode(self, vlm, strategy: Strategy, items, in_flight: int | None = None,
               log: ForwardLog | None = None) -> Iterator[PageDecoding]:
        cfg = replace(self.cfg, max_pages=in_flight) if in_flight else self.cfg
        engine = Engine(vlm.adapter(), strategy, cfg, log=log)
        try:
            yield from engine.run(items)
        finally:
            self.forward_passes += engine.forward_passes
            self._engine = engine  # `figures`: of the last decode

    def figures(self) -> dict[str, Any]:
        return self._engine.attention_stats.figures() if self._engine else {}

    def run(self, vlm, strategy: Strategy, samples: Iterable[Sample], **kwargs) -> RunResult:
        return parse_pages(vlm, strategy, samples, self, **kwargs)

    def close(self) -> None:
        """Nothing to release: each `decode` builds its engine and drops it."""
