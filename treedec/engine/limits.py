"""A page's limits, the same on every runtime and defined once: the embedded engine's
`EngineConfig` and the vLLM runtime's `VLLMConfig` both extend `PageLimits`, and the
`runtime` configs (treedec/conf/runtime/*.yaml) take their defaults from those dataclasses
(registered as schemas in `treedec.conf`). A stream or page reaching a limit is cut and
flagged (`treedec.engine.new_token`), never dropped.

`max_page_tokens` bounds a page's work: the tokens generated over all its streams together.
A model that forks wildly (random weights, a badly trained rule: `max_branches` streams of
`max_new_tokens` each, 128 x 4096 by default) is cut there, every stream still decoding
ended and the page flagged; its default, 4 x `max_new_tokens`, leaves a page whose flat form
fits in one stream room for every branch's own markers."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.errors import UserError

PAGE_TOKENS_PER_STREAM = 4  # max_page_tokens=null: this many times max_new_tokens


@dataclass
class PageLimits:
    max_pages: int = 16  # pages decoded concurrently (continuous batching)
    max_new_tokens: int = 4096  # per stream (v2 pages: flat form up to ~3.4k tokens)
    max_branches: int = 128  # streams per page
    max_page_tokens: int | None = None  # per page, all streams together; null: 4 x max_new_tokens

    def __post_init__(self):
        for name in ("max_pages", "max_new_tokens", "max_branches", "max_page_tokens"):
            value = getattr(self, name)
            if value is None and name == "max_page_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"runtime.{name} must be a whole number >= 1{' or null' * (name == 'max_page_tokens')}"
                                f", got {value!r}")

    @property
    def page_tokens(self) -> int:
        """The tokens a page may generate, all its streams together."""
        return self.max_page_tokens or PAGE_TOKENS_PER_STREAM * self.max_new_tokens
