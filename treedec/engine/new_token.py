"""What happens when a stream gains a token — the same on every runtime: the strategy may
end the stream or fork children from it, and the page's limits cut and flag."""
from __future__ import annotations

from treedec.engine.limits import PageLimits
from treedec.engine.policy import Fork, Policy
from treedec.graph import DecodingGraph


def take_token(graph: DecodingGraph, sid: int, token: int, policy: Policy, limits: PageLimits,
               flags: list[str]) -> list[Fork]:
    """Append `token` to stream `sid`, finish it on an end token or at `max_new_tokens`
    (cut, flagged), end the whole page at its token budget (`cut_page`), and return the
    forks the strategy starts from it."""
    s = graph[sid]
    graph.append(sid, [token])
    if policy.is_end(graph, sid, token):
        graph.finish(sid, "eos")
        return []
    forks = policy.forks(graph, sid, len(s.tokens) - 1)
    if s.generated >= limits.max_new_tokens:
        graph.finish(sid, "max_new_tokens", cut=True)
        flags.append(f"cut: stream {sid} ({s.label}) reached max_new_tokens={limits.max_new_tokens}")
    if graph.total_generated() >= limits.page_tokens:
        cut_page(graph, limits.page_tokens, flags)
        return []
    return forks


def cut_page(graph: DecodingGraph, budget: int, flags: list[str]) -> None:
    """End every stream of the page still decoding (cut), the page flagged once: it spent its
    token budget (`PageLimits.max_page_tokens`)."""
    live = graph.live()
    for s in live:
        graph.finish(s.id, "max_page_tokens", cut=True)
    if live:
        flags.append(f"cut: page reached max_page_tokens={budget} (all its streams together), "
                     f"{len(live)} stream(s) still decoding ended")


def may_fork(graph: DecodingGraph, max_branches: int, flags: list[str]) -> bool:
    """False (and the page flagged once) when the page has `max_branches` streams already."""
    if len(graph) < max_branches:
        return True
    msg = f"cut: branch limit {max_branches} reached, later forks dropped"
    if msg not in flags:
        flags.append(msg)
    return False
