"""The embedded engine: decodes a batch of page trees, one flat forward per step.

Each step gathers every live stream of every active page (its pending tokens) into one
flat batch: token ids, positions from the decoding graph (plus the page's
`Prompt.position_offset`), and an additive ancestor mask over the shared KV arena built
from parent pointers. Prefixes are stored once. Pages join (prefill) and leave (KV freed)
between steps, bounded by `max_pages` and a KV token budget. A page cut by a limit is
flagged, never dropped.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import torch

from treedec.engine.draft import DraftTree, StreamState, Verdict
from treedec.engine.forced import ForcedChoice
from treedec.engine.kv import KVArena
from treedec.engine.limits import PageLimits
from treedec.engine.malloc import hold_freed_memory
from treedec.engine import forward_log
from treedec.engine.page_decoding import PageDecoding
from treedec.engine.page_kv import PageKV
from treedec.engine.page_options import PageOptions
from treedec.engine.policy import Fork, Policy
from treedec.engine.new_token import may_fork, take_token
from treedec.engine.step_attention import AttentionStats, dense_mask, page_batch
from treedec.engine.step_batch import StepBatch, StreamWork, build_batch
from treedec.engine.step_observer import StepObserver
from treedec.errors import UserError
from treedec.models.adapter import CausalLMAdapter, Prompt


_END = object()  # the item iterator ended (`next`'s default: an item None says "not ready yet")


@dataclass
class EngineConfig(PageLimits):  # max_pages, max_new_tokens, max_branches, max_page_tokens: engine.limits
    max_kv_tokens: int = 1 << 20  # KV slots over all active pages
    compact_min: int = 2048  # compact the arena when it has this many slots ...
    compact_ratio: float = 0.5  # ... and this fraction of them is free
    # attention of a step: dense (one mask over the whole arena: every row pays for every page's KV) | blocked (each
    # page's rows against its own KV, pages in buckets of similar rows and keys; treedec.engine.step_attention) |
    # auto: blocked when the dense mask would hand the kernel more than `dense_waste` x the real score elements
    # (each page's rows x its own keys): with P pages in flight that waste is about P
    attention: str = "auto"
    dense_waste: float = 4.0
    bucket_ratio: float = 0.5  # blocked: a page joins a bucket from this fraction of its rows and keys (0: one batch)

    def __post_init__(self):
        super().__post_init__()
        if self.attention not in ("auto", "blocked", "dense"):
            raise UserError(f"runtime.attention must be auto, blocked or dense, got {self.attention!r}")


Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # HF LogitsProcessor: (ids [1,T], scores [1,V])


class Engine:
    """Decodes pages with a policy (a `Strategy`) on a model adapter. A step is its phases:
    collect the streams with work and their drafts -> build the batch -> forward -> accept,
    fork, finish (per stream) -> account; its observer (`StepObserver`) sees the batch after."""

    def __init__(self, model: CausalLMAdapter, policy: Policy, config: EngineConfig | None = None,
                 processors: Iterable[Processor] = (), log: forward_log.ForwardLog | None = None):
        hold_freed_memory()  # a step's cost then depends on its shape, not on the process's history
        self.model, self.policy = model, policy
        self.cfg = config or EngineConfig()
        self.processors = list(processors)
        self.arena = KVArena()
        self.active: list[PageKV] = []
        self._next_pid = 0
        self.forward_passes = 0
        self.observer = StepObserver(log)  # every prefill and step is handed to it (treedec.results.cost_model's log)
        self._hidden = policy.needs_hidden  # its drafts read hidden states (DraftSource.needs_hidden)
        self._forced = model.forced  # treedec.models.forced: tokens from the ground truth
        self._blocks = self.cfg.attention != "dense" and model.supports_blocks

    @property
    def attention_stats(self) -> AttentionStats:
        return self.observer.attention

    @property
    def log(self) -> forward_log.ForwardLog | None:
        return self.observer.log

    # ------------------------------------------------------------------ public
    def run(self, items: Iterable[tuple | None], on_done: Callable[[PageDecoding], None] | None = None,
            between_steps: Callable[["Engine"], None] | None = None) -> Iterator[PageDecoding]:
        """Decode `(name, prompt, sample)` items (a fourth element, `PageOptions`, where a page asks
        for its own limits, sampling or forced target) with continuous batching; yields each page's
        record as it finishes (completion order). `items` may be a lazy iterator: an item is taken
        only when the engine can admit it (one is held ahead). An iterator whose next item is
        not ready (drafted in another process, a server's next request) may yield None: the
        engine steps the pages in flight and asks again (with none in flight it asks at once: the
        iterator may wait). `between_steps(engine)` is called after every step (a server streams
        the pages' new tokens and drops the pages whose clients left: `drop`)."""
        items = iter(items)  # pulled one at a time, when there is room: memory does not grow with the pages
        t0 = time.perf_counter()  # every page counts as submitted at the start (queue_s), as a list would be
        head = next(items, _END)
        while head is not _END or self.active:
            head = self._admit_ready(head, items, t0)
            if head is _END and not self.active:
                break
            if any(p.graph.live() for p in self.active):
                self._step()
            if between_steps is not None:
                between_steps(self)
            if head is None:  # not ready before this step: ask again
                head = next(items, _END)
            for page in [p for p in self.active if p.graph.done]:
                record = self._retire(page)
                if on_done:
                    on_done(record)
                yield record

    def drop(self, name: str) -> bool:
        """Stop decoding the page `name` now, its KV freed (a served request whose client left);
        False where it is not in flight."""
        page = next((p for p in self.active if p.record.name == name), None)
        if page is None:
            return False
        self.active.remove(page)
        self.arena.free(page.release())
        return True

    # ------------------------------------------------------------------ admission
    def _admit_ready(self, head, items: Iterator, t0: float):
        """Admit items while there is room (one at least, when nothing is in flight: limits cut
        it); the next item not admitted (`_END`: none left; None: not ready yet)."""
        while head is None and not self.active:  # nothing to step: ask until an item comes
            head = next(items, _END)
        while head is not _END and head is not None and self._can_admit(len(head[1].ids)):
            self._admit(*head, t0=t0)
            head = next(items, _END)
        if not self.active and head is not _END:
            self._admit(*head, t0=t0)  # over budget even alone: admit and let limits cut it
            head = next(items, _END)
        return head

    def _can_admit(self, prompt_len: int) -> bool:
        return len(self.active) < self.cfg.max_pages and self.arena.used + prompt_len <= self.cfg.max_kv_tokens

    def _admit(self, name: str, prompt: Prompt, sample: Any, options: PageOptions | None = None, *,
               t0: float) -> None:
        record = PageDecoding(name=name, sample=sample, t_submit=t0, t_admit=time.perf_counter())
        page = PageKV(record=record, pid=self._next_pid, offset=prompt.position_offset)
        self._next_pid += 1
        if options is not None:
            page.limits, page.forks = options.limits, options.forks
            page.sampler = None if options.sampling is None or options.sampling.plain else options.sampling.for_page()
        root = page.graph.root(prompt.ids, label="root")
        if self._forced:  # the page's own target, else the strategy's of the sample's ground truth
            target = options.target if options is not None else None
            page.forced = ForcedChoice(target, self.policy.tokenizer.eos_id) if target is not None \
                else ForcedChoice.of(self.policy, sample, prompt.ids)
        t_forward = forward_log.clock()
        if self._hidden:
            logits, kv, page.hidden[root.id] = self.model.prefill(prompt, hidden=True)
        else:
            logits, kv = self.model.prefill(prompt)
        forward = forward_log.since(t_forward)
        self.forward_passes += 1
        page.slots[root.id] = self.arena.add_prefill(kv, page.pid)
        page.anc[root.id] = torch.empty(0, dtype=torch.long)
        record.steps = 1
        record.timeline.append([root.id])
        self.active.append(page)
        self._emit(page, root.id, logits)
        self.observer.prefill(len(prompt.ids), forward, time.perf_counter() - record.t_admit)

    # ------------------------------------------------------------------ one step
    def _step(self) -> None:
        t_step = time.perf_counter()
        work = self._collect()
        if not work:
            return
        batch = build_batch(work, self.arena)
        logits, hidden = self._forward(batch)
        touched = self._settle(batch, logits, hidden)
        self._account(touched)
        self.observer.step(batch, len(touched), time.perf_counter() - t_step)

    def _collect(self) -> list[StreamWork]:
        """Every live stream with tokens not yet in the KV, and its draft (one call for the
        step's streams: a batching drafter)."""
        pending = [StreamWork(page, s.id, len(page.slots[s.id]), None) for page in self.active
                   for s in page.graph.live() if len(page.slots[s.id]) < len(s.tokens)]
        if pending:
            trees = self.policy.draft_many([(w.page.graph, w.sid, w.page.record.sample,
                                             StreamState(w.page.hidden.get(w.sid))) for w in pending])
            for w, tree in zip(pending, trees):
                w.tree = tree if tree else None
        return pending

    def _forward(self, batch: StepBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward over the batch, page-blocked or under one dense mask: logits of the
        `keep` rows [K, V], and their hidden states [K, H] where the drafts read them."""
        extra: dict[str, Any] = {"hidden": True} if self._hidden else {}
        if (rows := self.policy.in_forward) is not None:  # a drafter's rows (PTP's placeholders)
            extra["placeholders"] = rows
        if self._use_blocks(batch):
            pages = page_batch(batch.spans, batch.owned, batch.base, self.cfg.bucket_ratio)
            batch.attn, batch.buckets, mask, extra["pages"] = pages.padded, len(pages.buckets), None, pages
        else:
            batch.attn, mask = batch.dense, dense_mask(batch.spans, batch.base, batch.rows)
        t_forward = forward_log.clock()
        out = self.model.step(batch.ids, batch.pos, mask, self.arena.cache, keep=batch.keep, **extra)
        batch.forward = forward_log.since(t_forward)
        self.forward_passes += 1
        return out if self._hidden else (out, None)

    def _use_blocks(self, batch: StepBatch) -> bool:
        spans = batch.spans
        if not self._blocks or spans[0].page == spans[-1].page:  # one page: the dense mask is its block
            return False
        return self.cfg.attention == "blocked" or batch.dense > self.cfg.dense_waste * batch.real

    def _settle(self, batch: StepBatch, logits: torch.Tensor, hidden: torch.Tensor | None) -> dict[int, list[int]]:
        """Each stream's verdict on its rows (after its last token, then after each draft
        node); the streams that advanced, by page id."""
        touched: dict[int, list[int]] = {}
        at = 0
        for w in batch.work:
            rows = slice(at, at + 1 + w.drafts)
            at = rows.stop
            self._accept(w, logits[rows], None if hidden is None else hidden[rows])
            touched.setdefault(w.page.pid, []).append(w.sid)
        return touched

    def _accept(self, w: StreamWork, logits: torch.Tensor, hidden: torch.Tensor | None) -> None:
        """Choose, judge the draft, free its rejected nodes' KV, count, keep the hidden state
        of the row that chose the new last token, and extend the stream (forks, ends)."""
        page, sid, tree = w.page, w.sid, w.tree
        choices = self._choose(page, sid, tree, logits)
        verdict = self.policy.accept(tree, choices, logits) if tree else Verdict([], choices[:1])
        verdict.choices = choices
        if tree:
            self.policy.observe(page.graph, sid, page.record.sample, tree, verdict)
        self.arena.free([sl for i, sl in enumerate(w.draft_slots) if i not in verdict.nodes])
        page.record.count_drafts(tree, len(verdict.nodes))
        if hidden is not None:  # the row after its last accepted node
            page.hidden[sid] = hidden[1 + verdict.nodes[-1] if verdict.nodes else 0]
        self._extend(page, sid, verdict.tokens, [w.draft_slots[i] for i in verdict.nodes])

    def _account(self, touched: dict[int, list[int]]) -> None:
        """A step on the critical path of each page that had work; the arena compacted when
        enough of it is free."""
        for page in self.active:
            if page.pid in touched:
                page.record.steps += 1
                page.record.timeline.append(touched[page.pid])
        self._maybe_compact()

    def _choose(self, page: PageKV, sid: int, tree: DraftTree | None, logits: torch.Tensor) -> list[int]:
        """Greedy token after the stream's last token (row 0) and after each draft node (a forced
        model's: the page's ground truth, `treedec.engine.forced`)."""
        if page.forced is not None:
            return page.forced.choose(page.graph, sid, tree)
        if page.sampler is not None:  # the page's own sampling (a served request's)
            return page.sampler.choose(page.graph, sid, tree, logits)
        if self.processors:
            ctx = page.graph.context(sid)
            rows = [ctx] + ([ctx + [tree.tokens[j] for j in tree.path(i)] for i in range(len(tree))] if tree else [])
            out = []
            for c, lg in zip(rows, logits):
                scores = lg[None]
                for proc in self.processors:
                    scores = proc(torch.tensor([c], dtype=torch.long), scores)
                out.append(int(torch.argmax(scores[0])))
            return out
        return logits.argmax(-1).tolist()

    # ------------------------------------------------------------------ streams
    def _emit(self, page: PageKV, sid: int, logits: torch.Tensor) -> None:
        """The first token of a stream after prefill."""
        self._extend(page, sid, self._choose(page, sid, None, logits[None]), [])

    def _extend(self, page: PageKV, sid: int, tokens: list[int], kv_slots: list[int]) -> None:
        """Append accepted tokens (the first `len(kv_slots)` already have KV, the last is
        pending), applying ends, forks and limits token by token."""
        g = page.graph
        s = g[sid]
        if not s.live:  # ended earlier in this step: its page was cut at its token budget
            self.arena.free(kv_slots)
            return
        for j, token in enumerate(tokens):
            if j < len(kv_slots):  # the token's KV exists: its slot joins the stream before any fork reads it
                page.slots[sid].append(kv_slots[j])
            for fork in take_token(g, sid, token, self.policy, page.limits or self.cfg, page.record.flags):
                if page.forks:
                    self._fork(page, fork)
            if not s.live:
                self.arena.free(kv_slots[j + 1:])
                self.arena.free(page.unseen())
                return

    def _fork(self, page: PageKV, fork: Fork) -> None:
        if not may_fork(page.graph, (page.limits or self.cfg).max_branches, page.record.flags):
            return
        page.fork(fork.parent, fork.at, len(page.graph))  # the child's KV view first: a bad fork point raises here
        page.graph.fork(fork.parent, fork.at, fork.first, fork.label)

    # ------------------------------------------------------------------ freeing
    def _maybe_compact(self) -> None:
        a = self.arena
        if a.size < self.cfg.compact_min or a.owner.count(-1) < self.cfg.compact_ratio * a.size:
            return
        remap = a.compact()
        if remap is None:
            return
        for page in self.active:
            page.remap(remap)

    def _retire(self, page: PageKV) -> PageDecoding:
        self.active.remove(page)
        self.arena.free(page.release())
        return page.record.finish(time.perf_counter())
