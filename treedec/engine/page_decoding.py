"""One page's decoding: the record every runtime fills (the embedded engine,
`treedec.engine.engine`; the vLLM runner, `treedec.runtimes.vllm.runner`) and every later
stage reads (a strategy's splice of its crops, `treedec.records.page_record`). A runtime's
own bookkeeping of a page in flight (the engine's KV slots, vLLM's request ids) is held
beside it, never in it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from treedec.engine.draft import DraftTree
from treedec.graph import DecodingGraph


@dataclass(kw_only=True)
class PageDecoding:
    name: str
    sample: Any  # what the page was decoded from (a `treedec.data` sample, a crop's)
    graph: DecodingGraph = field(default_factory=DecodingGraph)
    t_submit: float = 0.0  # perf_counter when the page was submitted (the run's start) ...
    t_admit: float = 0.0  # ... and when the runtime took it
    steps: int = 0  # forward passes in which the page had work (its critical path), prefill included
    latency_s: float = 0.0  # admission to finish (`finish`)
    queue_s: float = 0.0  # submission to admission (`finish`)
    flags: list[str] = field(default_factory=list)  # the runtime's cuts
    timeline: list[list[int]] = field(default_factory=list)  # per step: streams that advanced
    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens accepted
    # per draft depth d (index d - 1): [verdicts on a draft reaching depth d, of those accepted to depth d]
    by_depth: list[list[int]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # a runtime's own per-page figures (vLLM: prefix cache)

    @property
    def generated(self) -> int:
        return self.graph.total_generated()

    def count_drafts(self, tree: DraftTree | None, accepted: int) -> None:
        """A verdict on a stream's draft tree: `accepted` of its nodes kept."""
        if tree:
            self.drafted += len(tree) - tree.scratch
            self.accepted += accepted
            self.count_depths(tree, accepted)

    def count_depths(self, tree: DraftTree, accepted: int) -> None:
        deepest = max(tree.depths()[:len(tree) - tree.scratch], default=0)
        while len(self.by_depth) < deepest:
            self.by_depth.append([0, 0])
        for d in range(deepest):
            self.by_depth[d][0] += 1
            self.by_depth[d][1] += accepted > d

    def finish(self, now: float) -> "PageDecoding":
        """The page done at `now` (perf_counter): its latency and queueing time set."""
        self.latency_s, self.queue_s = now - self.t_admit, self.t_admit - self.t_submit
        return self
