"""`python -m treedec check model.path=DIR`: does treedec decode this checkpoint exactly as
transformers does (`treedec.check`)? Per page: tokens that agree, the first divergence
and the two candidates' logits there. Exits 1 on a divergence that is not a near-tie."""
from __future__ import annotations

import sys
from itertools import islice

import torch
from rich.console import Console
from rich.table import Table

from treedec.check import check_pages
from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.outputs import RunOutput

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def main(cfg, out: RunOutput) -> dict | None:
    vlm = load_vlm(cfg.model)
    if not hasattr(vlm, "generate_inputs"):
        raise UserError(f"model={cfg.model.name} is not a transformers checkpoint: there is no generate to check against")
    if cfg.dtype is not None:
        if cfg.dtype not in DTYPES:
            raise UserError(f"unknown dtype {cfg.dtype!r}; choose {', '.join(DTYPES)}")
        vlm.model.to(DTYPES[cfg.dtype])
    samples = [s for s in islice(open_dataset(cfg.data, model_pages=vlm.pages), int(cfg.pages)) if s.image is not None]
    if not samples:
        raise UserError(f"data set {cfg.data.name} gave no readable page to check")
    checks = check_pages(vlm, samples, str(cfg.mode), int(cfg.max_new_tokens))
    table = Table(title=f"treedec's engine vs transformers' generate ({len(checks)} pages, {vlm.model.dtype})")
    for c in ("page", "tokens", "agree", "verdict", "first divergence (treedec / transformers: token, logit)"):
        table.add_column(c)
    for c in checks:
        out.page(c.name, c.figures())
        where = "" if c.diverged_at is None else (f"@{c.diverged_at}: {c.treedec_token} ({c.treedec_token_logit}) / "
                                                  f"{c.transformers_token} ({c.transformers_token_logit})")
        table.add_row(c.name, f"{c.treedec_tokens}/{c.transformers_tokens}", str(c.agreed_tokens), c.verdict, where)
    Console().print(table)
    bad = [c.name for c in checks if c.verdict == "diverged"]
    summary = out.summary({"pages": len(checks), "agreeing_pages": sum(c.verdict == "agrees" for c in checks),
                           "near_tie_pages": sum(c.verdict == "near_tie" for c in checks), "diverged_pages": len(bad),
                           "dtype": str(vlm.model.dtype).removeprefix("torch."), "model_path": str(cfg.model.path)},
                          "check")
    if bad:
        print(f"treedec: check: {len(bad)} page(s) diverge from transformers beyond a near-tie: {', '.join(bad)}",
              file=sys.stderr)
        sys.exit(1)
    return summary
