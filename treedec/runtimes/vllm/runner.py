"""Decoding pages on one vLLM engine: every stream of a page's decoding graph is one
request whose prompt is the stream's ancestors; the strategy's fork rule runs on the root
request's streamed tokens and each fork submits a branch request between two engine steps."""
from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from treedec.engine.draft import DraftTree
from treedec.engine.page_decoding import PageDecoding
from treedec.engine.policy import Fork
from treedec.engine.new_token import may_fork, take_token
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.vlm import VLM
from treedec.runtimes.vllm.engine import Served, VLLMConfig
from treedec.runtimes.vllm.hsd import draft_refusal, drafting
from treedec.runtimes.vllm.prompts import PagePrompt, fold, page_prompt, stop_ids
from treedec.strategies.base import Strategy

_RUNS = itertools.count()


@dataclass(kw_only=True)
class _Requests:
    """A page on vLLM: its decoding record (what every runtime fills; its `drafted` here: draft
    tokens vLLM scheduled for verification, of requests vLLM finished itself; `accepted`: a
    step's new tokens of a request minus its one sampled token) and the runner's requests beside it."""
    record: PageDecoding
    pid: int
    prompt: PagePrompt  # the root's prompt ids, as vLLM is given them, and the page's image for vLLM
    uuid: str  # content hash of that image: vLLM's multimodal (and prefix-cache) key
    open: dict[str, int] = field(default_factory=dict)  # running request id -> stream
    cached: int = 0  # prompt tokens served from the prefix cache (all requests)
    prompt_tokens: int = 0

    @property
    def graph(self) -> DecodingGraph:
        return self.record.graph


class VLLMRunner:
    """Decodes pages with a strategy on one vLLM engine (the embedded engine's contract:
    `run(items)` yields each page's `PageDecoding` as it finishes)."""

    def __init__(self, served: Served, vlm: VLM, strategy: Strategy, cfg: VLLMConfig):
        if drafting(strategy):
            why = draft_refusal(strategy, cfg)
            if why is None and served.drafts is None and not strategy.needs_hidden:
                why = (f"strategy {strategy.name!r} needs an engine with treedec's page-draft proposer "
                       "(VLLMRuntime builds it and writes the drafts)")
            if why:
                raise UserError(why)
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self.engine, self.vlm, self.strategy, self.cfg = served.engine, vlm, strategy, cfg
        self.run_id = next(_RUNS)  # request ids stay unique on the shared engine
        tok = vlm.tokenizer
        self.params = SamplingParams(temperature=0.0, max_tokens=cfg.max_new_tokens, stop_token_ids=stop_ids(tok),
                                     skip_special_tokens=False, detokenize=False,
                                     output_kind=RequestOutputKind.DELTA)
        self.active: dict[int, _Requests] = {}
        self.requests: dict[str, _Requests] = {}
        self._next_pid = 0
        self.forward_passes = 0
        self.prompt_tokens = 0  # prompt tokens of every request of the finished pages ...
        self.cached_tokens = 0  # ... and how many of them the prefix cache served

    # ------------------------------------------------------------------ public
    def run(self, items: Iterable[tuple[str, Any, Any]]) -> Iterator[PageDecoding]:
        """Decode `(name, image, sample)` items with continuous batching; yields records as
        pages finish (completion order). `items` may be a lazy iterator: an item is taken
        only when a page can be admitted."""
        t0 = time.perf_counter()  # every page counts as submitted at the start (queue_s), as the engine counts
        items = iter(items)
        head = next(items, None)
        try:
            while head is not None or self.active:
                while head is not None and len(self.active) < self.cfg.max_pages:
                    self._admit(*head, t0)
                    head = next(items, None)
                working = [p for p in self.active.values() if p.open]
                if working:
                    touched: dict[int, list[int]] = {}
                    for out in self.engine.step():
                        self._on_output(out, touched)
                    self.forward_passes += 1
                    for page in working:
                        page.record.steps += 1
                        page.record.timeline.append(touched.get(page.pid, []))
                for page in [p for p in self.active.values() if not p.open]:
                    yield self._retire(page)
        finally:  # stopped early or failed: leave the shared engine with no requests of ours
            if self.requests:
                self.engine.abort_request(list(self.requests))
                self.requests.clear()

    # ------------------------------------------------------------------ pages
    def _admit(self, name: str, image, sample, t_submit: float) -> None:
        prompt = page_prompt(self.vlm, self.strategy.mode, image, None if sample is None else sample.category)  # a crop's own
        uuid = hashlib.blake2b(prompt.image.tobytes(), digest_size=16).hexdigest()
        record = PageDecoding(name=name, sample=sample, t_submit=t_submit, t_admit=time.perf_counter())
        page = _Requests(record=record, pid=self._next_pid, prompt=prompt, uuid=uuid)
        self._next_pid += 1
        self.active[page.pid] = page
        root = page.graph.root(prompt.ids, label="root")
        self._submit(page, root.id)

    def _retire(self, page: _Requests) -> PageDecoding:
        del self.active[page.pid]
        self.cached_tokens += page.cached
        self.prompt_tokens += page.prompt_tokens
        page.record.extra.update(prompt_tokens=page.prompt_tokens, cached_prompt_tokens=page.cached)
        return page.record.finish(time.perf_counter())

    # ------------------------------------------------------------------ requests
    def _prompt(self, page: _Requests, sid: int) -> list[int] | None:
        """The stream's ancestor context with the image prompt folded back to one placeholder
        (vLLM's processor expands it); None when vLLM could not be given this prompt."""
        return fold(page.prompt, page.graph.context(sid), self.vlm.tokenizer.image_id)

    def _submit(self, page: _Requests, sid: int) -> None:
        g = page.graph
        ids = self._prompt(page, sid)
        if ids is None:
            g.finish(sid, "unservable prompt", cut=True)
            page.record.flags.append(f"cut: stream {sid} ({g[sid].label}): its prompt holds an <image> token after "
                                     "the image, which vLLM's processor would take for a second image")
            return
        rid = f"{self.run_id}-{page.pid}:{sid}"
        prompt = {"prompt_token_ids": ids, "multi_modal_data": {"image": page.prompt.image},
                  "multi_modal_uuids": {"image": [page.uuid]}}
        try:
            self.engine.add_request(rid, prompt, self.params)
        except ValueError as e:  # e.g. prompt longer than max_model_len
            g.finish(sid, "rejected by vLLM", cut=True)
            page.record.flags.append(f"cut: stream {sid} ({g[sid].label}) rejected by vLLM: {str(e).splitlines()[0]}")
            return
        page.open[rid] = sid
        self.requests[rid] = page

    def _on_output(self, out, touched: dict[int, list[int]]) -> None:
        page = self.requests.get(out.request_id)
        if page is None:
            return
        sid = page.open.get(out.request_id)
        if sid is None:
            return
        s = page.graph[sid]
        if s.generated == 0:  # the stream's first output
            _check_prompt(page, sid, out.prompt_token_ids)
            if out.num_cached_tokens is not None:
                page.cached += out.num_cached_tokens or 0
                page.prompt_tokens += len(out.prompt_token_ids or [])
        comp = out.outputs[0]
        new = list(comp.token_ids)
        if new:
            touched.setdefault(page.pid, []).append(sid)
        taken = 0
        for token in new:
            if not s.live:
                break
            self._extend(page, sid, token)
            taken += 1
        # one step gives a request its sampled token + the draft tokens vLLM accepted before it
        page.record.accepted += max(0, taken - 1)
        _count_drafts(page.record, comp)
        if s.live and out.finished:  # vLLM stopped it for a reason of its own (e.g. max_model_len)
            page.graph.finish(sid, f"vllm: {comp.finish_reason}", cut=True)
            page.record.flags.append(f"cut: stream {sid} ({s.label}) stopped by vLLM ({comp.finish_reason}: "
                                     f"{comp.stop_reason})")
        self._close_ended(page, out)

    def _close_ended(self, page: _Requests, out) -> None:
        """Forget the requests of the page's ended streams (`out`'s, or every request of a page
        cut at its token budget: take_token), aborting those vLLM still runs."""
        ended = [rid for rid, k in page.open.items() if not page.graph[k].live]
        running = [rid for rid in ended if not (rid == out.request_id and out.finished)]
        if running:
            self.engine.abort_request(running)
        for rid in ended:
            del page.open[rid]
            del self.requests[rid]

    def _extend(self, page: _Requests, sid: int, token: int) -> None:
        """Append one token; ends, forks and limits as the embedded engine applies them."""
        for fork in take_token(page.graph, sid, token, self.strategy, self.cfg, page.record.flags):
            self._fork(page, fork)

    def _fork(self, page: _Requests, fork: Fork) -> None:
        g = page.graph
        if not may_fork(g, self.cfg.max_branches, page.record.flags):
            return
        child = g.fork(fork.parent, fork.at, fork.first, fork.label)
        self._submit(page, child.id)


def _check_prompt(page: _Requests, sid: int, expanded) -> None:
    """Flag a stream whose prompt vLLM's processor expanded into other ids than its context (the
    model's own expansion, what the embedded engine feeds): its tokens are then not the same."""
    context = page.graph.context(sid)
    if expanded is not None and list(expanded) != context:
        at = next((i for i, (a, b) in enumerate(zip(expanded, context)) if a != b), min(len(expanded), len(context)))
        page.record.flags.append(f"vllm: stream {sid} ({page.graph[sid].label}): vLLM expanded its prompt into other "
                                 f"ids than the model's processor ({len(expanded)} / {len(context)} ids, first "
                                 f"difference at {at})")


def _count_drafts(record: PageDecoding, comp) -> None:
    """A finished request's drafts (vLLM's per-request spec-decode metrics, None before it finishes)."""
    metrics = getattr(comp, "spec_decode_metrics", None)  # at finish, with per_request_spec_decode_metrics
    if metrics is not None:
        record.drafted += int(metrics.num_draft_tokens)
        # "detailed": one (drafted, accepted) per verify step -> per-depth counts (acceptance_by_depth)
        for d, a in zip(metrics.per_step_drafted, metrics.per_step_accepted):
            if d:
                record.count_depths(DraftTree.chain([0] * d), a)  # a chain of d drafts: only its depths count
