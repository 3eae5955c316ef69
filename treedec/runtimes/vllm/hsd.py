"""Drafting strategies on the vLLM runtime: which it can run (and why not, in one line),
where it runs them differently from the embedded engine (`draft_notes`, the one place that
says so), the engine config that installs their drafter (HSD's page drafts: treedec's
page-draft proposer, `drafts.py`; MTP: the head as a Medusa draft model,
`mtp.py`), and HSD's drafts written to the engine's draft store."""
from __future__ import annotations

from treedec.runtimes.vllm.drafts import PROPOSER, DraftStore
from treedec.runtimes.vllm.engine import VLLMConfig, VLLMEngines
from treedec.runtimes.vllm.mtp import mtp_engine_cfg, mtp_notes, mtp_refusal
from treedec.runtimes.vllm.prompts import text_prompt_ids
from treedec.strategies.base import Strategy


def drafting(strategy: Strategy) -> bool:
    return strategy.drafter is not None


def draft_refusal(strategy: Strategy, cfg: VLLMConfig) -> str | None:
    """Why `strategy`'s drafting cannot run on this backend (one line), None when it can, from
    its draft source's declared capabilities (`treedec.engine.draft.DraftSource`): drafts known
    before decoding (`pages_ahead`: HSD's pages and crops) served by treedec's proposer, exact
    acceptance; drafts on the hidden state (`needs_hidden`: MTP): `mtp.mtp_refusal`."""
    from treedec.engine.draft import accept_greedy

    name, source = repr(strategy.name), strategy.drafter
    see = "run it with runtime=embedded (see treedec/runtimes/README.md)"
    if source is not None and source.needs_hidden and source.pages_ahead:
        return (f"strategy {name} combines drafts known ahead with drafts on the hidden state (FirstOf: page drafts "
                f"where they match, MTP where they do not); a vLLM engine has one speculative method: {see}")
    if source is not None and source.needs_hidden:  # MTP (mtp, hpd): the head as a Medusa draft model (mtp.py)
        return mtp_refusal(strategy, cfg)
    if source is None or not source.pages_ahead:
        return (f"strategy {name} drafts with {type(source).__name__}, which has no vLLM proposer (only drafts known "
                f"before decoding have: HSD's page and crop drafts, served as linear chains): {see}")
    if strategy.acceptor is not accept_greedy:
        return (f"strategy {name} accepts drafts lossily (relaxed_threshold), vLLM's rejection sampler only exactly "
                f"(greedy): {see}")
    if cfg.speculative_config and dict(cfg.speculative_config).get("model") != PROPOSER:
        return (f"strategy {name} drafts through treedec's own custom_class proposer on runtime=vllm: leave "
                "runtime.speculative_config unset (num_speculative_tokens = strategy.max_depth)")
    if cfg.data_parallel_size > 1:
        return (f"strategy {name} runs on one vLLM engine here (data_parallel_size=1): the data-parallel workers "
                "rebuild the strategy by name and would lose its drafts")
    return None


def draft_notes(strategy: Strategy) -> list[str]:
    """Where a drafting strategy runs differently on vLLM (its pages do not: acceptance is
    exact), one line each; nothing for a strategy without drafts."""
    source, name = strategy.drafter, strategy.name
    if source is None:
        return []
    if source.needs_hidden:
        return mtp_notes(strategy)
    notes = [f"{name}: drafts verified as one linear chain per request and step (vLLM has no token trees): where several "
             f"draft places match, the one agreeing furthest back is proposed, not the prefix tree of all of them"]
    notes.append(f"{name}: drafts of all the run's pages (HSD stage 1: its crops) are matched together (a page's "
                 "first proposal may be another page's: the proposer cannot tell requests apart)")
    notes += [f"{name}: {what} is the embedded engine's; vLLM's proposer matches the drafts exactly, n-gram-wise, up to "
              f"num_speculative_tokens = strategy.max_depth ({source.depth}) tokens per step" for what in source.step_only]
    return notes


def draft_engine_cfg(strategy: Strategy, cfg: VLLMConfig, vlm, engines: VLLMEngines) -> VLLMConfig:
    """`cfg` with the page-draft proposer as vLLM's speculative method (K = the source's
    `depth`, the strategy's `max_depth`) and per-request draft counts reported; for drafts on
    the hidden state, the head bound to `vlm` as a Medusa draft model (`mtp.mtp_engine_cfg`; its
    folder kept by the runtime's `engines`)."""
    from dataclasses import replace

    if strategy.needs_hidden:
        return mtp_engine_cfg(strategy, cfg, vlm, engines)
    if cfg.speculative_config:  # already the proposer's (draft_refusal lets no other through)
        return cfg
    spec = {"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": int(strategy.drafter.depth)}
    return replace(cfg, speculative_config=spec,
                   engine_args={"per_request_spec_decode_metrics": "detailed", **dict(cfg.engine_args)})


def write_drafts(store: DraftStore, vlm, strategy: Strategy, samples) -> None:
    """Write the drafts of `samples` that the strategy's draft source knows ahead (its
    `sequences`: HSD's pages, handed to it by `treedec.run.stages` before this run, or stage 1's
    crops) to the engine's draft store, each headed by its own prompt's tail (a crop's: its
    category's crop prompt)."""
    source = strategy.drafter
    m = source.matcher
    category = [s.category for s in samples]
    heads = {c: text_prompt_ids(vlm, strategy.mode, c) for c in set(category)}
    store.write([q for s, c in zip(samples, category) for q in source.sequences([s.name], heads[c])], m.w_min, m.w_max)
