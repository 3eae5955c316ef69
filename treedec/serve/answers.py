"""A decoded request as its answer: the ids of the page in flat form (every branch spliced in
place of its fork token: what `sequential` writes), the stop token never among them, decoded with
or without the special tokens as the request asks; `finish_reason` `length` where a limit cut a
stream, else `stop`. While a request decodes, the part of its answer no later token can change
(`DecodingGraph.settled`) is what a streaming client is sent, its text held back while it ends
inside a character (a byte-level BPE's partial UTF-8); an answer cut inside a character leaves
that character out, as vLLM's detokenizer does."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.graph import CUT, DecodingGraph

PARTIAL = "\ufffd"  # what decoding an unfinished UTF-8 sequence gives


@dataclass
class Answer:
    ids: list[int]
    text: str
    finish_reason: str  # stop | length
    completion_tokens: int  # the answer's ids and the stop token where one ended it (as vLLM counts)


def _ids(graph: DecodingGraph, strategy, settled: bool) -> tuple[list[int], bool]:
    """The flat ids so far (`settled`) or in full, without a final stop token; whether one ended it."""
    ends = list(strategy.tokenizer.eos_ids)
    kw = dict(drop_tail=ends, nested_drop_head=strategy.nested_drop_head)
    ids = graph.settled(**kw) if settled else graph.flatten(**kw)
    stopped = bool(ids) and ids[-1] in ends and not graph[0].live
    return (ids[:-1] if stopped else ids), stopped


def decode(tokenizer, ids: list[int], skip_special: bool) -> str:
    return tokenizer.hf.decode(list(ids), skip_special_tokens=skip_special)


def answer(graph: DecodingGraph, strategy, skip_special: bool, max_tokens: int | None = None) -> Answer:
    ids, stopped = _ids(graph, strategy, settled=False)
    cut = any(s.status == CUT for s in graph.streams)
    if max_tokens is not None and len(ids) > max_tokens:  # a tree's branches together past the request's budget
        ids, cut, stopped = ids[:max_tokens], True, False
    text = decode(strategy.tokenizer, ids, skip_special).rstrip(PARTIAL)  # a cut inside a character: as vLLM, left out
    return Answer(ids, text, "length" if cut or not stopped else "stop", len(ids) + stopped)


def settled_text(graph: DecodingGraph, strategy, skip_special: bool, max_tokens: int | None = None) -> str:
    """The answer's text so far that no later token can change (its end held back while it is a
    partial character)."""
    ids, _ = _ids(graph, strategy, settled=True)
    if max_tokens is not None:
        ids = ids[:max_tokens]
    text = decode(strategy.tokenizer, ids, skip_special)
    return text.rstrip(PARTIAL) if text.endswith(PARTIAL) else text
