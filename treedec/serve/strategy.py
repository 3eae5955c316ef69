"""The strategy behind the API, from `strategy=`: a strategy decoding in one engine pass as it is
(sequential, padoc and the fork rules, mtp, hpd, ptp: their drafts and forks need nothing but
the request); HSD (`hsd`, `padoc_hsd`) as its base strategy drafting from each request's own
pipeline draft (`treedec.serve.drafts`). A strategy whose work is several passes of the client's
own (`crops`: MinerU's and PaddleOCR-VL's layout pass, then one request per crop) is what the
client does; asked of the server it is refused in one line."""
from __future__ import annotations

from dataclasses import dataclass, replace

from omegaconf import DictConfig, OmegaConf

from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import PageDraftDrafter, SequenceDrafter
from treedec.engine.draft_length import AdaptiveLength
from treedec.errors import UserError
from treedec.formats import Format
from treedec.strategies.base import Strategy, build_strategy, options_of
from treedec.strategies.hsd import HSDOptions, ocr_config
from treedec.serve.drafts import RequestDrafter, RequestDrafts

SPECULATIVE = ("hsd", "padoc_hsd")
PRESETS = {"padoc_hsd": {"base": "padoc", "draft_len": "fixed"}}  # as treedec.strategies.hsd makes them


@dataclass
class Served:
    strategy: Strategy  # made for the server's one engine run
    drafter: RequestDrafter | None = None  # HSD's: drafts each request before it joins the engine


def served_strategy(cfg, vlm, fmt: Format) -> Served:
    options = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    name = options["name"]
    if name in SPECULATIVE:
        return _hsd(name, options, vlm, fmt)
    strategy = build_strategy(options, vlm.tokenizer).with_format(fmt, pages=False)
    if strategy.before is not None or strategy.after is not None:
        raise UserError(f"strategy={name} decodes a page in several passes of its own; behind the server each "
                        "request is one pass (a client such as MinerU's makes the crop requests itself): serve "
                        "strategy=sequential or hsd")
    return Served(strategy.for_run(vlm))


def _hsd(name: str, options: dict, vlm, fmt: Format) -> Served:
    o = options_of(HSDOptions, name, {**PRESETS.get(name, {}), **options})
    if o.drafts != "pipeline":
        raise UserError(f"strategy.drafts={o.drafts}: behind the server each request is drafted from its own "
                        "image (strategy.drafts=pipeline)")
    if o.mtp or o.relaxed_threshold is not None:
        raise UserError("serve runs hsd with exact acceptance and pipeline drafts alone (mtp=false, "
                        "relaxed_threshold=null)")
    base = build_strategy({**dict(o.base_options or {}), "name": o.base}, vlm.tokenizer).with_format(fmt, pages=False)
    if base.drafter is not None or base.before is not None or base.after is not None:
        raise UserError(f"strategy.base must name a fork strategy without drafts or stages, got {o.base!r}")
    matcher = NgramMatcher(o.w_min, o.w_max, o.max_depth, o.max_nodes, o.fuzzy)
    pages = PageDraftDrafter(vlm.tokenizer, "flat" if base.mode == "flat" else "tree", matcher, layout=o.layout)
    pages.fmt = fmt
    source = RequestDrafts(SequenceDrafter(matcher), pages)
    drafter = AdaptiveLength(source, o.max_depth) if o.draft_len == "adaptive" else source
    strategy = replace(base, name=name, drafter=drafter, made_for_run=True)
    return Served(strategy, RequestDrafter(source, fmt, vlm.tokenizer, ocr_config(o.ocr), o.draft_workers, o.snap,
                                           o.draft_noise))
