"""Oracle decoding depth, model-free: how many forward steps a page needs sequentially
(one stream, flat form) and under a strategy's decoding tree (its ground-truth graph)."""
from __future__ import annotations

from treedec.page import Page
from treedec.serialize import page_to_flat
from treedec.strategies.base import Strategy


def page_depth(page: Page, strategy: Strategy) -> dict[str, float]:
    """Sequential depth l(B) + sum l(Y_k) (tokens of the flat form) and the strategy's
    depth (critical path of its tree; PaDoc: max_k(l(B<=k) + l(Y_k))), in tokens = steps."""
    tok = strategy.tokenizer
    sequential = len(tok.encode(page_to_flat(page)))
    fork = strategy.target(page, tok, [tok.image_id]).critical_path()
    return {"blocks": len(page.blocks), "sequential_depth": sequential, "fork_depth": fork,
            "reduction": 1 - fork / sequential if sequential else 0.0}
