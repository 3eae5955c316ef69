"""A strategy = what the model is asked for (a prompt mode and the ground-truth decoding
graph it is trained on) + a fork rule + a draft source and acceptor, and the stages around
its decode that it declares (`treedec.strategies.stages`; run by `treedec.run.stages`). Composed,
never subclassed: a new strategy is one small file registering a factory."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, fields, make_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from omegaconf import MISSING

from treedec.engine.draft import DraftRequest, DraftSource, DraftTree, Verdict, accept_greedy
from treedec.engine.policy import Fork
from treedec.errors import UserError
from treedec.formats import Format, get_format, require
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.registry import Registry
from treedec.strategies.stages import AfterDecoding, BeforeDecoding
from treedec.tokenizer import Tokenizer

ForkRule = Callable[[DecodingGraph, int, int, Tokenizer], list[Fork]]
"""(graph, stream, index of its new token, tokenizer) -> forks to start."""
Target = Callable[[Page, Tokenizer, list[int], Format], DecodingGraph]
"""(page, tokenizer, prompt ids, output format) -> the page's ground truth as a decoding graph,
the page written as the format writes it."""



def plugin_folders() -> list[Path]:
    """Folders of fork-rule files: the repository's top-level `strategies/` (beside the package,
    in a checkout or an editable install) and those in TREEDEC_STRATEGIES (os.pathsep-separated)."""
    folders = [Path(__file__).resolve().parents[2] / "strategies"]
    folders += [Path(p) for p in os.environ.get("TREEDEC_STRATEGIES", "").split(os.pathsep) if p]
    return [f for f in folders if f.is_dir()]


STRATEGIES: Registry[Callable[..., "Strategy"]] = Registry("strategy", "treedec.strategies", "treedec.strategies",
                                                           plugin_folders)


@dataclass
class NoOptions:
    """The schema of a strategy without options of its own (sequential, padoc, crops): its name
    alone (registered with Hydra as `schema/strategy_plain`)."""
    name: str = MISSING


_HELD = {"int": int, "float": float, "bool": bool, "str": str, int: int, float: float, bool: bool, str: str}


def plugin_schema(name: str) -> type:
    """A plug-in strategy's schema, from its factory: `name`, then each option typed by its
    annotation where that is int, float, bool or str (else Any), its default the factory's (none:
    required)."""
    params = list(inspect.signature(STRATEGIES.get(name)).parameters.values())[1:]
    spec = [("name", str, name)]
    for p in params:
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = MISSING if p.default is inspect.Parameter.empty else p.default
        spec.append((p.name, _HELD.get(p.annotation, Any), default))
    return make_dataclass(f"{name}_options", spec)


def default_config(name: str) -> dict[str, Any]:
    """A strategy's config from its factory: `name` and each option's default (`plugin_schema`'s
    fields that have one: the config of a plug-in that brings no YAML file)."""
    return {f.name: f.default for f in fields(plugin_schema(name)) if f.default is not MISSING}


def options_of(schema, name: str, options: Mapping[str, Any]):
    """A strategy factory's options as its schema (a dataclass: the keys of its YAML config,
    registered with Hydra in `treedec.conf`); an unknown key or bad value is a one-line `UserError`."""
    try:
        return schema(**{k: v for k, v in options.items() if k != "name"}, name=name)
    except TypeError as e:
        raise UserError(f"bad config for strategy {name!r}: {e}") from None


def build_strategy(cfg: Mapping[str, Any], tokenizer: Tokenizer, fmt: Format | None = None) -> "Strategy":
    """The strategy a `strategy` config names, its other keys passed to the factory, speaking
    output format `fmt` (None: treedec's; a format it cannot serve is a one-line `UserError`)."""
    params = {k: v for k, v in cfg.items() if k != "name"}
    factory = STRATEGIES.get(cfg["name"])
    try:
        inspect.signature(factory).bind(tokenizer, **params)
    except TypeError as e:
        raise UserError(f"bad config for strategy {cfg['name']!r}: {e}") from None
    strategy = factory(tokenizer, **params)
    return strategy.with_format(fmt) if fmt is not None else strategy


@dataclass(frozen=True)
class Strategy:
    """Frozen once built: a variant is a new strategy (`dataclasses.replace`, `with_format`, `for_run`)."""
    name: str
    mode: str  # the prompt mode the model is asked in (a control token of the tokenizer)
    tokenizer: Tokenizer
    target: Target  # ground truth as a graph: training data and oracle depth
    fork_rule: ForkRule | None = None
    nested_drop_head: tuple[int, ...] = ()  # a nested branch's first token dropped when spliced back
    # its draft source as a factory: a run drafts with `drafter.for_run(vlm)` (`for_run`), never with this one
    drafter: DraftSource | None = None
    acceptor: Callable[..., Verdict] = accept_greedy  # (tree, choices, logits) -> Verdict
    # stages around its decode (`treedec.strategies.stages`), each model run of them one `runtime.run` of
    # `treedec.run.stages.run_strategy`: before (HSD: pages drafted, stage 1 on their crops), after (`crops`: regions read)
    before: BeforeDecoding | None = None
    after: AfterDecoding | None = None
    made_for_run: bool = False  # its drafter is a run's own (`for_run`)
    needs: tuple[str, ...] = ()  # format capabilities it needs beyond a fork rule's `forks` (hsd: block_text)
    format: Format = field(default_factory=lambda: get_format("treedec"))  # the output format it speaks
    speaks: tuple[Any, ...] = ()  # its parts that write the format too (hsd's page drafter): `with_format` sets their `fmt`
    # (itself, a format) -> itself rebuilt to speak that format, or None (spoken as any strategy is): `crops`, whose
    # stages are the format's (`treedec.strategies.crops_regions`), hsd in a two-stage format (its crops speculated)
    respeak: Callable[["Strategy", Format], "Strategy | None"] | None = None

    def with_format(self, fmt: Format, pages: bool = True) -> "Strategy":
        """This strategy speaking `fmt`: its targets, drafts and parsing in that format; refused in
        one line where the format cannot serve it (a fork rule needs `forks`, hsd `block_text`, a
        page-mode strategy a page prompt). `pages=False`: it decodes whatever it is asked, not
        whole pages of its own (a server's requests: a two-stage format's layout pass, its crops)."""
        for need in (("forks",) if self.fork_rule else ()) + self.needs:
            require(fmt, need, self.name)
        spoken = self.respeak(self, fmt) if self.respeak is not None else None
        if spoken is not None:
            return spoken
        if pages and fmt.two_stage and self.mode == "flat":
            raise UserError(f"strategy={self.name} reads the whole page, which format {fmt.name!r} does not (its "
                            f"layout comes from {'a detector' if fmt.detector_layout else 'a layout pass'}, its "
                            "text from crop reads): use strategy=crops")
        for part in self.speaks:
            part.fmt = fmt
        return replace(self, format=fmt)

    def truth(self, page: Page, prompt: list[int]) -> DecodingGraph:
        """The page's ground truth as this strategy decodes it, in its format (`target`)."""
        return self.target(page, self.tokenizer, prompt, self.format)

    def for_run(self, vlm) -> "Strategy":
        """This strategy for one run on `vlm`: a copy drafting with a source of its own, made for
        the run (`DraftSource.for_run`: no drafts and nothing seen from another run; MTP's head,
        PTP's placeholders loaded). A strategy already made for a run is returned as it is: a stage
        hands that run's source its pages' drafts before the runtime runs it (`treedec.run.stages`)."""
        if self.made_for_run:
            return self
        return replace(self, drafter=self.drafter.for_run(vlm) if self.drafter is not None else None,
                       made_for_run=True)

    # --- the engine's Policy
    def forks(self, graph: DecodingGraph, sid: int, index: int) -> list[Fork]:
        return self.fork_rule(graph, sid, index, self.tokenizer) if self.fork_rule else []

    def is_end(self, graph: DecodingGraph, sid: int, token: int) -> bool:
        return token in self.tokenizer.eos_ids

    @property
    def needs_hidden(self) -> bool:
        return self.drafter is not None and self.drafter.needs_hidden

    @property
    def in_forward(self):
        """Rows the drafter adds to the model's own forward (PTP's `Placeholders`), or None."""
        return self.drafter.placeholders if self.drafter is not None and self.drafter.drafts_in_forward else None

    def draft_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return self.drafter.propose_many(requests) if self.drafter else [None] * len(requests)

    def accept(self, tree: DraftTree, choices: list[int], logits) -> Verdict:
        return self.acceptor(tree, choices, logits)

    def observe(self, graph: DecodingGraph, sid: int, sample: object, tree: DraftTree, verdict: Verdict) -> None:
        if self.drafter is not None:
            self.drafter.observe(graph, sid, sample, tree, verdict)

    # --- output
    def flat_text(self, graph: DecodingGraph) -> str:
        """The page in flat form: every branch spliced in place of its fork token, its own
        `<eos>` dropped (nested branches too); the end token dropped too where the format writes
        no end marker as text."""
        tok = self.tokenizer
        eos = list(tok.eos_ids)
        ids = graph.flatten(drop_tail=eos, nested_drop_head=self.nested_drop_head)
        if not self.format.eos_text and ids and ids[-1] in eos:
            ids = ids[:-1]
        return tok.decode(ids)

    def parse(self, graph: DecodingGraph, width: int, height: int, image_path: str = ""):
        """The decoded page (`flat_text`, read by the format): (text, `ParseResult`); an output
        without its end token is flagged as cut where the format writes no end marker."""
        text = self.flat_text(graph)
        result = self.format.parse(text, width, height, image_path)
        ended = bool(graph.streams) and graph[0].tokens[-1:] != [] and graph[0].tokens[-1] in self.tokenizer.eos_ids
        if not self.format.eos_text and not ended:
            result.repairs.append("no end token: the output was cut")
        return text, result
