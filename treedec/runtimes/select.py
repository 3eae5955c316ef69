"""The runtime a `runtime` config names (`runtime=embedded|vllm`), built from its options
(one style of validation: `treedec.runtimes.base.config_from`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from treedec.errors import UserError
from treedec.runtimes.base import Runtime

RUNTIMES = ("embedded", "vllm")


def make_runtime(cfg: Any, model_path: str | Path | None = None, beside: Runtime | None = None) -> Runtime:
    """`cfg`: the `runtime` config (its `name` picks the runtime); `model_path`: the model's
    checkpoint folder (vLLM serves from it; None for a model without one); `beside`: a runtime
    whose engines this one shares (vLLM's: one takes 20-90 s to start), closed by `beside`."""
    name = cfg.get("name") if cfg is not None else "embedded"
    if name == "embedded":
        from treedec.runtimes.embedded import EmbeddedRuntime

        return EmbeddedRuntime.from_cfg(cfg)
    if name == "vllm":
        from treedec.runtimes.vllm.runtime import VLLMRuntime

        return VLLMRuntime(cfg, model_path, engines=beside.engines if isinstance(beside, VLLMRuntime) else None)
    raise UserError(f"unknown runtime {name!r}; use runtime={' or runtime='.join(RUNTIMES)}")
