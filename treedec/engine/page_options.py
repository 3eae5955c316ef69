"""What one page asks of the engine beyond the run's strategy and limits (a served request,
`treedec.serve`): its own limits (a request's `max_tokens`), how its tokens are chosen
(`treedec.engine.sampling`), whether it forks (a request for a crop or a layout alone does
not), and, under a forced model, the target it is forced to (the text a request about a page or
one of its regions is answered with) instead of the strategy's target of its sample's ground
truth. An engine item `(name, prompt, sample)` may carry one as a fourth element."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.engine.limits import PageLimits
from treedec.engine.sampling import Sampling
from treedec.graph import DecodingGraph


@dataclass(frozen=True)
class PageOptions:
    limits: PageLimits | None = None  # None: the engine's
    sampling: Sampling | None = None  # None (or greedy without penalties): the greedy token of the raw logits
    target: DecodingGraph | None = None  # a forced model's: None, the strategy's target of the sample's ground truth
    forks: bool = True  # False: the strategy's fork rule is not asked on this page (a request that is no page)
