"""A page's limits, the same on every runtime and defined once: the embedded engine's
`EngineConfig` and the vLLM runtime's `VLLMConfig` both extend `PageLimits`, and the
`runtime` configs (treedec/conf/runtime/*.yaml) take their defaults from those dataclasses
(registered as schemas in `treedec.conf`). A stream or page reaching a limit is cut and
flagged (`treedec.engine.new_token`), never dropped."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.errors import UserError


@dataclass
class PageLimits:
    max_pages: int = 16  # pages decoded concurrently (continuous batching)
    max_new_tokens: int = 4096  # per stream (v2 pages: flat form up to ~3.4k tokens)
    max_branches: int = 128  # streams per page

    def __post_init__(self):
        for name in ("max_pages", "max_new_tokens", "max_branches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"runtime.{name} must be a whole number >= 1, got {value!r}")
