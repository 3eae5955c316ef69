"""A strategy = what the model is asked for (a prompt mode and the ground-truth decoding
graph it is trained on) + a fork rule (+ drafter and acceptor, later). Composed, never
subclassed: a new strategy is one small file registering a factory."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from treedec.engine.draft import Drafter, DraftTree, StreamState, Verdict, accept_greedy, propose_many
from treedec.engine.policy import Fork
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.registry import Registry
from treedec.tokenizer import Tokenizer

if TYPE_CHECKING:
    from treedec.engine.engine import PageResult

ForkRule = Callable[[DecodingGraph, int, int, Tokenizer], list[Fork]]
"""(graph, stream, index of its new token, tokenizer) -> forks to start."""
Target = Callable[[Page, Tokenizer, list[int]], DecodingGraph]
"""(page, tokenizer, prompt ids) -> the page's ground truth as a decoding graph."""



def plugin_folders() -> list[Path]:
    """Folders of fork-rule files: the repository's top-level `strategies/` (beside the package,
    in a checkout or an editable install) and those in TREEDEC_STRATEGIES (os.pathsep-separated)."""
    folders = [Path(__file__).resolve().parents[2] / "strategies"]
    folders += [Path(p) for p in os.environ.get("TREEDEC_STRATEGIES", "").split(os.pathsep) if p]
    return [f for f in folders if f.is_dir()]


STRATEGIES: Registry[Callable[..., "Strategy"]] = Registry("strategy", "treedec.strategies", "treedec.strategies",
                                                           plugin_folders)


def default_config(name: str) -> dict[str, Any]:
    """A strategy's config from its factory: `name` and each option's default (the config of a
    plug-in that brings no YAML file)."""
    params = list(inspect.signature(STRATEGIES.get(name)).parameters.values())[1:]
    return {"name": name, **{p.name: p.default for p in params if p.default is not inspect.Parameter.empty}}


def build_strategy(cfg: Mapping[str, Any], tokenizer: Tokenizer) -> "Strategy":
    """The strategy a `strategy` config names, its other keys passed to the factory."""
    params = {k: v for k, v in cfg.items() if k != "name"}
    factory = STRATEGIES.get(cfg["name"])
    try:
        inspect.signature(factory).bind(tokenizer, **params)
    except TypeError as e:
        raise UserError(f"bad config for strategy {cfg['name']!r}: {e}") from None
    return factory(tokenizer, **params)


@dataclass
class Strategy:
    name: str
    mode: str  # the prompt mode the model is asked in (a control token of the tokenizer)
    tokenizer: Tokenizer
    target: Target  # ground truth as a graph: training data and oracle depth
    fork_rule: ForkRule | None = None
    nested_drop_head: tuple[int, ...] = ()  # a nested branch's first token dropped when spliced back
    drafter: Drafter | None = None
    acceptor: Callable[..., Verdict] = accept_greedy  # (tree, choices, logits) -> Verdict
    # work before decoding (drafting, HSD stage 1): (vlm, samples, runtime, progress) -> per-page figures, `runtime`
    # being the Runtime that runs the pages (`treedec.runtimes.base`), never an engine config: a model run it needs
    # (stage 1's crops) is `runtime.run(...)`, so its forwards count in the run's `forward_passes`; `prepare.stream`,
    # if set: (vlm, samples, runtime, figures, clock) -> the samples as they are ready (drafting beside decoding)
    prepare: Callable[..., dict[str, dict]] | None = None
    # work after decoding, before pages are recorded (crops: each region read from its own crop):
    # (vlm, engine results as pages finish, the embedded runtime, progress) -> the results, extended;
    # the forwards it runs are added to the runtime's `forward_passes`
    after_decode: Callable[..., Iterator[PageResult]] | None = None

    # --- the engine's Policy
    def forks(self, graph: DecodingGraph, sid: int, index: int) -> list[Fork]:
        return self.fork_rule(graph, sid, index, self.tokenizer) if self.fork_rule else []

    def is_end(self, graph: DecodingGraph, sid: int, token: int) -> bool:
        return token == self.tokenizer.eos_id

    @property
    def wants_hidden(self) -> bool:
        return bool(getattr(self.drafter, "wants_hidden", False))

    @property
    def in_forward(self):
        """Rows a drafter adds to the model's own forward (PTP's `Placeholders`), or None."""
        return getattr(self.drafter, "placeholders", None)

    def draft_many(self, requests: list[tuple[DecodingGraph, int, object, StreamState | None]]
                   ) -> list[DraftTree | None]:
        return propose_many(self.drafter, requests) if self.drafter else [None] * len(requests)

    def accept(self, tree: DraftTree, choices: list[int], logits) -> Verdict:
        return self.acceptor(tree, choices, logits)

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        observe = getattr(self.drafter, "observe", None)
        if observe is not None:
            observe(graph, sid, sample, tree, verdict)

    # --- output
    def flat_text(self, graph: DecodingGraph) -> str:
        """The page in flat form: every branch spliced in place of its fork token, its own
        `<eos>` dropped (nested branches too)."""
        tok = self.tokenizer
        return tok.decode(graph.flatten(drop_tail=[tok.eos_id], nested_drop_head=self.nested_drop_head))
