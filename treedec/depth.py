"""Oracle decoding depth, model-free: how many forward steps a page needs sequentially
(one stream, flat form) and with one content branch per layout region (tree form)."""
from __future__ import annotations

from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.serialize import page_to_flat, page_to_tree
from treedec.tokenizer import Tokenizer


def tree_graph(page: Page, tok: Tokenizer, prompt: list[int] | None = None) -> DecodingGraph:
    """The page's ground truth as a decoding graph: the root stream is the prompt followed
    by the layout stream; each `<FORK>` starts a branch `<CHILD>content<eos>` at its position."""
    tree = page_to_tree(page)
    g = DecodingGraph()
    root = g.root(prompt if prompt is not None else [tok.image_id])
    layout = tok.encode(tree.layout)
    k = 0
    for t in layout:
        g.append(root.id, [t])
        if t == tok.fork_id:
            branch = tok.encode(tree.branches[k])
            child = g.fork(root.id, at=len(root.tokens) - 1, first=branch[:1], label=f"block {k + 1}")
            g.append(child.id, branch[1:])
            g.finish(child.id)
            k += 1
    g.finish(root.id)
    return g


def page_depth(page: Page, tok: Tokenizer) -> dict[str, float]:
    """Sequential depth l(B) + sum l(Y_k) (tokens of the flat form) and fork depth
    max_k(l(B<=k) + l(Y_k)) (critical path of the tree form), in tokens = forward steps."""
    sequential = len(tok.encode(page_to_flat(page)))
    fork = tree_graph(page, tok).critical_path()
    return {"blocks": len(page.blocks), "sequential_depth": sequential, "fork_depth": fork,
            "reduction": 1 - fork / sequential if sequential else 0.0}
