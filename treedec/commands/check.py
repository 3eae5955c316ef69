"""`python -m treedec check model.path=DIR [runtime=vllm]`: does treedec decode this checkpoint
exactly as transformers does (`treedec.results.check`)? Per page: tokens that agree, the first
divergence and the two candidates' logits there; with `runtime=vllm`, vLLM's output ids
checked against the same `generate` beside the engine's. Exits 1 on a divergence (of
either) that is not a near-tie."""
from __future__ import annotations

import sys
from itertools import islice

import torch
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.models.page_model import GeneratingPageModel
from treedec.results.check import PageCheck, check_pages
from treedec.run.outputs import RunOutput

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def main(cfg, out: RunOutput) -> dict | None:
    vlm = load_vlm(cfg.model)
    if not isinstance(vlm, GeneratingPageModel):
        raise UserError(f"model={cfg.model.name} is not a transformers checkpoint: there is no generate to check against")
    if cfg.dtype is not None:
        if cfg.dtype not in DTYPES:
            raise UserError(f"unknown dtype {cfg.dtype!r}; choose {', '.join(DTYPES)}")
        vlm.model.to(DTYPES[cfg.dtype])
    samples = [s for s in islice(open_dataset(cfg.data, model_pages=vlm.pages), int(cfg.pages)) if s.image is not None]
    if not samples:
        raise UserError(f"data set {cfg.data.name} gave no readable page to check")
    runtime = second_runtime(cfg)
    try:
        checks = check_pages(vlm, samples, str(cfg.mode), int(cfg.max_new_tokens), runtime)
    finally:
        if runtime is not None:
            runtime.close()
    name = runtime.name if runtime is not None else None
    for c in checks:
        out.page(c.name, c.figures())
    Console().print(table(checks, f"treedec's engine vs transformers' generate ({len(checks)} pages, {vlm.model.dtype})",
                          name))
    figures = {"pages": len(checks), **verdicts(checks), "dtype": str(vlm.model.dtype).removeprefix("torch."),
               "model_path": str(cfg.model.path), "runtime": name or "embedded"}
    if name is not None:
        figures.update({f"{name}_{k}": v for k, v in verdicts([c.runtime for c in checks]).items()})
    summary = out.summary(figures, "check")
    bad = [f"{c.name} ({who})" for c in checks for who, x in (("treedec", c), (name, c.runtime))
           if x is not None and x.verdict == "diverged"]
    if bad:
        print(f"treedec: check: {len(bad)} output(s) diverge from transformers beyond a near-tie: {', '.join(bad)}",
              file=sys.stderr)
        sys.exit(1)
    return summary


def second_runtime(cfg):
    """The runtime checked beside treedec's engine (`runtime=vllm`), its token budget and dtype
    the check's; None for the embedded engine (the one checked anyway)."""
    rt = cfg.get("runtime")
    if rt is None or rt.get("name", "embedded") == "embedded":
        return None
    from treedec.runtimes.select import make_runtime

    rt = OmegaConf.merge(rt, {"max_new_tokens": int(cfg.max_new_tokens)}, {"dtype": cfg.dtype} if cfg.dtype else {})
    return make_runtime(rt, cfg.model.get("path"))


def verdicts(checks: list[PageCheck]) -> dict[str, int]:
    return {"agreeing_pages": sum(c.verdict == "agrees" for c in checks),
            "near_tie_pages": sum(c.verdict == "near_tie" for c in checks),
            "diverged_pages": sum(c.verdict == "diverged" for c in checks)}


def table(checks: list[PageCheck], title: str, runtime: str | None) -> Table:
    t = Table(title=title)
    for c in ("page", "tokens", "agree", "verdict", "first divergence (treedec / transformers: token, logit)"):
        t.add_column(c)
    if runtime is not None:
        t.add_column(f"{runtime}: agree, verdict, first divergence")
    for c in checks:
        row = [c.name, f"{c.treedec_tokens}/{c.transformers_tokens}", str(c.agreed_tokens), c.verdict, where(c)]
        if runtime is not None:
            row.append(f"{c.runtime.agreed_tokens}, {c.runtime.verdict} {where(c.runtime)}")
        t.add_row(*row)
    return t


def where(c: PageCheck) -> str:
    return "" if c.diverged_at is None else (f"@{c.diverged_at}: {c.treedec_token} ({c.treedec_token_logit}) / "
                                             f"{c.transformers_token} ({c.transformers_token_logit})")
