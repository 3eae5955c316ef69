"""Drafting strategies on the vLLM runtime: which it can run (and why not, in one line),
where it runs them differently from the embedded engine (`draft_notes`, the one place that
says so), the engine config that installs their drafter (HSD's page drafts: treedec's
page-draft proposer, `vllm_drafts.py`; MTP: the head as a Medusa draft model,
`vllm_mtp.py`), and HSD's drafts written to the engine's draft store."""
from __future__ import annotations

from treedec.runtimes.vllm_drafts import PROPOSER, DraftStore, page_draft_sequences
from treedec.runtimes.vllm_engine import VLLMConfig
from treedec.runtimes.vllm_mtp import mtp_engine_cfg, mtp_notes, mtp_refusal
from treedec.strategies.base import Strategy


def drafting(strategy: Strategy) -> bool:
    return strategy.drafter is not None or strategy.prepare is not None


def _page_drafter(strategy: Strategy):
    """The strategy's drafter, unwrapped from an adaptive length cap (vLLM proposes fixed K)."""
    from treedec.engine.draft_length import AdaptiveLength

    d = strategy.drafter
    return d.inner if isinstance(d, AdaptiveLength) else d


def _sequences(strategy: Strategy):
    """The strategy's `SequenceDrafter` (per-sample draft sequences: HSD stage 1's crop
    strategy), unwrapped; None for any other drafter."""
    from treedec.drafters.page_drafts import SequenceDrafter

    d = _page_drafter(strategy)
    return d if isinstance(d, SequenceDrafter) else None


def draft_refusal(strategy: Strategy, cfg: VLLMConfig) -> str | None:
    """Why `strategy`'s drafting cannot run on this backend (one line), None when it can:
    page drafts (`PageDraftDrafter`) from a prepare step that offers them (`draft_pages`:
    HSD's) or per-sample sequences (`SequenceDrafter`: HSD stage 1's crops), exact
    acceptance, the backend's own proposer; MTP: `vllm_mtp.mtp_refusal`."""
    from treedec.drafters.page_drafts import PageDraftDrafter
    from treedec.engine.draft import accept_greedy

    name = repr(strategy.name)
    see = "run it with runtime=embedded (see treedec/runtimes/README.md)"
    if strategy.wants_hidden:  # MTP (mtp, hpd): the head as a Medusa draft model (vllm_mtp.py)
        return mtp_refusal(strategy, cfg)
    pages = isinstance(_page_drafter(strategy), PageDraftDrafter) and hasattr(strategy.prepare, "draft_pages")
    if not pages and _sequences(strategy) is None:
        return (f"strategy {name} drafts with {type(strategy.drafter).__name__}, which has no vLLM proposer (only "
                f"HSD's page and crop drafts have, served as linear chains): {see}")
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
    if not drafting(strategy):
        return []
    if strategy.wants_hidden:
        return mtp_notes(strategy)
    drafter, prep = _page_drafter(strategy), strategy.prepare
    m, name = drafter.matcher, strategy.name
    notes = [f"{name}: drafts verified as one linear chain per request and step (vLLM has no token trees): where several "
             f"draft places match, the one agreeing furthest back is proposed, not the prefix tree of all of them"]
    if _sequences(strategy) is not None:
        return notes
    if getattr(prep, "stage1", False):
        notes.append(f"{name}: HSD stage 1 decodes the crops on vLLM, their drafts matched over every crop's draft "
                     "(a crop's first proposal may be another crop's: the proposer cannot tell requests apart)")
    if drafter is not strategy.drafter:
        notes.append(f"{name}: draft_len=adaptive is the embedded engine's; vLLM proposes up to "
                     f"num_speculative_tokens = strategy.max_depth ({m.max_depth}) tokens per step")
    if m.fuzzy:
        notes.append(f"{name}: fuzzy draft matching is the embedded engine's; vLLM's proposer matches exactly")
    if drafter.layout == "lines":
        notes.append(f"{name}: layout=lines (drafting the root stream line by line) is the embedded engine's; "
                     "vLLM's proposer matches it n-gram-wise")
    return notes


def draft_engine_cfg(strategy: Strategy, cfg: VLLMConfig, vlm) -> VLLMConfig:
    """`cfg` with the page-draft proposer as vLLM's speculative method (K = the strategy's
    `max_depth`) and per-request draft counts reported; for MTP strategies, the head bound
    to `vlm` as a Medusa draft model (`vllm_mtp.mtp_engine_cfg`)."""
    from dataclasses import replace

    if strategy.wants_hidden:
        return mtp_engine_cfg(strategy, cfg, vlm)
    if cfg.speculative_config:  # already the proposer's (draft_refusal lets no other through)
        return cfg
    spec = {"method": "custom_class", "model": PROPOSER,
            "num_speculative_tokens": int(_page_drafter(strategy).matcher.max_depth)}
    return replace(cfg, speculative_config=spec,
                   engine_args={"per_request_spec_decode_metrics": "detailed", **dict(cfg.engine_args)})


def write_drafts(store: DraftStore, vlm, strategy: Strategy, samples: list, runtime=None,
                 progress: bool = False) -> dict[str, dict]:
    """Write what `strategy` drafts from to the engine's draft store; returns per-page figures,
    as `prepare` does. HSD: every page drafted (pipeline OCR, or the ground truth for
    `drafts=oracle`) and, with stage 1, refined by the strategy's own prepare step, its crops
    decoded on `runtime` (a vLLM run before the pages', its drafts from this store too);
    stage 1's crop strategy: its per-crop sequences; MTP: nothing (the head drafts in the
    engine)."""
    if strategy.wants_hidden:
        return {}
    drafter, prompt = _page_drafter(strategy), vlm.prompt_ids(strategy.mode)
    m = drafter.matcher
    if _sequences(strategy) is not None:  # each sequence headed by the prompt's tail, as page_draft_sequences does
        head = list(prompt[-m.w_max:]) if m.w_max > 0 else []
        store.write([head + q for s in samples for q in drafter.seqs.get(s.name, [])], m.w_min, m.w_max)
        return {}
    prep = strategy.prepare
    if prep.stage1:
        figures = prep(vlm, samples, runtime, progress)  # TwoStages: drafts, stage 1 on `runtime` -> drafter.pages
        pages = drafter.pages
    else:
        pages = prep.draft_pages(vlm, samples)
        figures = {name: prep.figures() for name in pages}
    drafts = [d for s in samples if s.name in pages
              for d in (pages[s.name] if isinstance(pages[s.name], list) else [pages[s.name]])]  # stage2_drafts=both
    store.write(page_draft_sequences(drafts, vlm.tokenizer, drafter.form, prompt, m.w_max), m.w_min, m.w_max)
    return figures
