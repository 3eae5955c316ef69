"""What happens when a stream gains a token — the same on every runtime: the strategy may
end the stream or fork children from it, and the page's limits cut and flag."""
from __future__ import annotations

from treedec.engine.policy import Fork, Policy
from treedec.graph import DecodingGraph


def take_token(graph: DecodingGraph, sid: int, token: int, policy: Policy, max_new_tokens: int,
               flags: list[str]) -> list[Fork]:
    """Append `token` to stream `sid`, finish it on an end token or at `max_new_tokens`
    (cut, flagged), and return the forks the strategy starts from it."""
    s = graph[sid]
    graph.append(sid, [token])
    if policy.is_end(graph, sid, token):
        graph.finish(sid, "eos")
        return []
    forks = policy.forks(graph, sid, len(s.tokens) - 1)
    if s.generated >= max_new_tokens:
        graph.finish(sid, "max_new_tokens", cut=True)
        flags.append(f"cut: stream {sid} ({s.label}) reached max_new_tokens={max_new_tokens}")
    return forks


def may_fork(graph: DecodingGraph, max_branches: int, flags: list[str]) -> bool:
    """False (and the page flagged once) when the page has `max_branches` streams already."""
    if len(graph) < max_branches:
        return True
    msg = f"cut: branch limit {max_branches} reached, later forks dropped"
    if msg not in flags:
        flags.append(msg)
    return False
