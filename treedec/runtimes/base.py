"""The runtime contract: what the one copy of the per-page bookkeeping
(`treedec.run.parse_pages.parse_pages`: pages read lazily and unreadable ones kept, the work before
decoding, the warm-up, records in input order, phases, each page written as it finishes)
asks of a runtime. A runtime only adapts a decoder to it:

- `embedded` (`treedec.runtimes.embedded.EmbeddedRuntime`): treedec's engine, one flat forward per step;
- `vllm` (`treedec.runtimes.vllm.runtime.VLLMRuntime`): every stream a vLLM request.

Both decode a strategy the same way (its fork rule and end test on every new token:
`treedec.engine.new_token`; its drafts verified exactly), so under greedy decoding they give
the same pages. Where a runtime cannot do what the strategy asks, it says so in one place:
`check` refuses (one-line `UserError`), `notes` names each difference, and the run's
`RunResult.notes` carries them to summary.json (`runtime_notes`) and the report.

Chosen by config: `runtime=embedded|vllm` (`treedec.runtimes.select.make_runtime`)."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable, Iterator, Protocol, runtime_checkable

from treedec.engine.page_decoding import PageDecoding
from treedec.engine.forward_log import ForwardLog
from treedec.errors import UserError


@runtime_checkable
class Runtime(Protocol):
    name: str  # runtime=NAME
    steps_counted: str  # what a page's `steps` count here (summary.json `steps_counted`)
    cfg: Any  # its config: a `treedec.engine.limits.PageLimits` (max_pages, ...) and the runtime's own options
    forward_passes: int  # a running total, never reset: forwards (embedded) or scheduler iterations (vLLM) of
    # every `decode` so far; a run's own is the difference (`parse_pages`)
    pending_inputs: bool  # its `decode` steps the pages it has while the next input is not ready (an input None:
    # pages drafted beside its run); False: every input is needed before decoding (vLLM's draft store)

    def check(self, vlm, strategy) -> None:
        """Refuse, with a one-line `UserError`, what this runtime cannot run."""

    def notes(self, strategy) -> list[str]:
        """Where this runtime runs `strategy` differently from the embedded engine (pages are
        the same; steps or drafts may not be), one line each."""

    def prepare(self, vlm, strategy, samples: Iterable) -> Iterable:
        """The samples to decode, the strategy's drafts handed to the decoder first where it
        needs them ahead (vLLM: a draft source's `sequences` written to its proposer's store)."""

    def prompt(self, vlm, strategy, sample) -> Any:
        """What `decode` takes for one readable page."""

    def decode(self, vlm, strategy, items: Iterable[tuple[str, Any, Any]], in_flight: int | None = None,
               log: ForwardLog | None = None) -> Iterator[PageDecoding]:
        """`(name, prompt, sample)` items (a lazy iterator, pulled when there is room) decoded,
        at most `in_flight` pages at once (None: `cfg.max_pages`); results as pages finish.
        `log`: where the forward passes are counted and timed for the cost model (the embedded
        engine adds each to it; a runtime that cannot see its passes leaves it empty)."""

    def figures(self) -> dict[str, Any]:
        """Run figures of the last `decode` (the engine's padding waste, vLLM's prefix cache)."""

    def run(self, vlm, strategy, samples: Iterable, **kwargs):
        """One run, a `treedec.records.RunResult`: `treedec.run.parse_pages.parse_pages(vlm, strategy,
        samples, self, **kwargs)` with what the runtime does around it (vLLM: its engine started
        before the clock; data parallelism). A strategy's stages are each one such run
        (`treedec.run.stages.run_strategy`); a runtime never runs them itself."""

    def close(self) -> None:
        """Release what it started (vLLM: its engines and the folders they serve from)."""


def config_from(cls, cfg: Any, where: str, hint: str = ""):
    """A config dataclass `cls` from a mapping (an OmegaConf node included), `cls` as it is,
    or `cls()` for None; an unknown key is a one-line `UserError` naming `where` and the
    options there (`hint`: where other options go)."""
    if cfg is None:
        return cls()
    if isinstance(cfg, cls):
        return cfg
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise UserError(f"{where} has no option(s) {', '.join(unknown)}; options: {', '.join(known)}{hint}")
    return cls(**dict(cfg))
