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
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from treedec.engine.draft import DraftTree, StreamState, Verdict
from treedec.engine.forced import ForcedChoice
from treedec.engine.kv import KVArena
from treedec.engine.limits import PageLimits
from treedec.engine.malloc import hold_freed_memory
from treedec.engine import pass_log
from treedec.engine.policy import Fork, Policy
from treedec.engine.new_token import may_fork, take_token
from treedec.engine.step_attention import AttentionStats, Span, dense_mask, page_batch, page_sizes, page_slots
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.adapter import CausalLMAdapter, Prompt


PENDING = object()  # an item iterator's "nothing ready yet": the engine steps the pages it has and asks again


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


@dataclass
class PageResult:
    name: str
    graph: DecodingGraph
    steps: int  # forward passes in which the page had work (its critical path), prefill included
    latency_s: float  # admission to finish
    queue_s: float  # submission to admission
    flags: list[str] = field(default_factory=list)
    timeline: list[list[int]] = field(default_factory=list)  # per step: streams that advanced
    sample: Any = None
    drafted: int = 0
    accepted: int = 0
    by_depth: list[list[int]] = field(default_factory=list)  # PageState.by_depth
    extra: dict[str, Any] = field(default_factory=dict)  # a runtime's own per-page figures (vLLM: prefix cache)

    @property
    def generated(self) -> int:
        return self.graph.total_generated()


@dataclass
class PageState:
    """A page being decoded: what every runtime keeps (this engine's `_Page`, the vLLM
    runner's)."""
    pid: int
    name: str
    sample: Any
    graph: DecodingGraph
    t_submit: float
    t_admit: float = 0.0
    steps: int = 0
    flags: list[str] = field(default_factory=list)
    timeline: list[list[int]] = field(default_factory=list)
    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens accepted
    # per draft depth d (index d - 1): [verdicts on a draft reaching depth d, of those accepted to depth d]
    by_depth: list[list[int]] = field(default_factory=list)

    def count_depths(self, tree: DraftTree, accepted: int) -> None:
        deepest = max(tree.depths()[:len(tree) - tree.scratch], default=0)
        while len(self.by_depth) < deepest:
            self.by_depth.append([0, 0])
        for d in range(deepest):
            self.by_depth[d][0] += 1
            self.by_depth[d][1] += accepted > d


@dataclass
class _Page(PageState):
    slots: dict[int, list[int]] = field(default_factory=dict)  # stream -> KV slot of each of its tokens
    anc: dict[int, torch.Tensor] = field(default_factory=dict)  # stream -> slots of its ancestors' visible prefixes
    offset: int = 0  # added to the graph positions the model sees (Prompt.position_offset)
    hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # stream -> StreamState.hidden (needs_hidden)
    forced: ForcedChoice | None = None  # a forced model's: tokens chosen from the page's ground truth


Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # HF LogitsProcessor: (ids [1,T], scores [1,V])


class Engine:
    def __init__(self, model: CausalLMAdapter, policy: Policy, config: EngineConfig | None = None,
                 processors: Iterable[Processor] = (), log: pass_log.PassLog | None = None):
        hold_freed_memory()  # a step's cost then depends on its shape, not on the process's history
        self.model, self.policy = model, policy
        self.log = log  # every prefill and step is added to it (treedec.cost_model); None: not recorded
        self.cfg = config or EngineConfig()
        self.processors = list(processors)
        self.arena = KVArena()
        self.active: list[_Page] = []
        self._next_pid = 0
        self.forward_passes = 0
        self._hidden = policy.needs_hidden  # its drafts read hidden states (DraftSource.needs_hidden)
        self._forced = model.forced  # treedec.models.forced: tokens from the ground truth
        self._blocks = self.cfg.attention != "dense" and model.supports_blocks
        self.attention_stats = AttentionStats()

    # ------------------------------------------------------------------ public
    def run(self, items: Iterable[tuple[str, Prompt, Any]], on_done: Callable[[PageResult], None] | None = None
            ) -> Iterator[PageResult]:
        """Decode `(name, prompt, sample)` items with continuous batching; yields results
        as pages finish (completion order). `items` may be a lazy iterator: an item is taken
        only when the engine can admit it (one is held ahead). An iterator whose next item is
        not ready (drafted in another process) may yield `PENDING`: the engine steps the pages in
        flight and asks again (with none in flight it asks at once: the iterator may wait)."""
        items = iter(items)  # pulled one at a time, when there is room: memory does not grow with the pages
        t0 = time.perf_counter()  # every page counts as submitted at the start (queue_s), as a list would be
        head = next(items, None)
        while head is not None or self.active:
            while head is PENDING and not self.active:  # nothing to step: ask until an item comes
                head = next(items, None)
            while head is not None and head is not PENDING and self._can_admit(len(head[1].ids)):
                self._admit(*head, t0)
                head = next(items, None)
            if not self.active:
                if head is None:
                    break
                self._admit(*head, t0)  # over budget even alone: admit and let limits cut it
                head = next(items, None)
            if any(p.graph.live() for p in self.active):
                self._step()
            if head is PENDING:  # not ready before this step: ask again
                head = next(items, None)
            for page in [p for p in self.active if p.graph.done]:
                result = self._retire(page)
                if on_done:
                    on_done(result)
                yield result

    # ------------------------------------------------------------------ admission
    def _can_admit(self, prompt_len: int) -> bool:
        return len(self.active) < self.cfg.max_pages and self.arena.used + prompt_len <= self.cfg.max_kv_tokens

    def _admit(self, name: str, prompt: Prompt, sample: Any, t_submit: float) -> None:
        page = _Page(self._next_pid, name, sample, DecodingGraph(), t_submit, t_admit=time.perf_counter(),
                     offset=prompt.position_offset)
        self._next_pid += 1
        root = page.graph.root(prompt.ids, label="root")
        if self._forced:  # the strategy's target of the sample's ground truth
            page.forced = ForcedChoice.of(self.policy, sample, prompt.ids)
        t_forward = pass_log.clock()
        if self._hidden:
            logits, kv, page.hidden[root.id] = self.model.prefill(prompt, hidden=True)
        else:
            logits, kv = self.model.prefill(prompt)
        forward = pass_log.since(t_forward)
        self.forward_passes += 1
        page.slots[root.id] = self.arena.add_prefill(kv, page.pid)
        page.anc[root.id] = torch.empty(0, dtype=torch.long)
        page.steps = 1
        page.timeline.append([root.id])
        self.active.append(page)
        self._emit(page, root.id, logits)
        if self.log is not None:
            self.log.add_prefill(len(prompt.ids), forward, time.perf_counter() - page.t_admit)

    # ------------------------------------------------------------------ one step
    def _step(self) -> None:
        t_step = time.perf_counter()
        pending = [(page, s.id, len(page.slots[s.id])) for page in self.active for s in page.graph.live()
                   if len(page.slots[s.id]) < len(s.tokens)]
        if not pending:
            return
        requests = [(page.graph, sid, page.sample, StreamState(page.hidden.get(sid))) for page, sid, _ in pending]
        trees = self.policy.draft_many(requests)  # one call for the step's streams (a batching drafter)
        # (page, stream, first pending index, draft)
        work: list[tuple[_Page, int, int, DraftTree | None]] = [
            (page, sid, done, tree if tree else None) for (page, sid, done), tree in zip(pending, trees)]
        base = self.arena.size
        n_new = sum(len(p.graph[sid].tokens) - i + (len(t) if t else 0) for p, sid, i, t in work)
        ids = torch.empty(n_new, dtype=torch.long)
        pos = torch.empty(n_new, dtype=torch.long)
        spans: list[Span] = []
        keep: list[int] = []  # rows whose logits are read: each stream's last pending token, then its draft nodes
        draft_slots: list[list[int]] = []
        row = 0
        for page, sid, first, tree in work:
            s = page.graph[sid]
            n = len(s.tokens) - first
            d = len(tree) if tree else 0
            ids[row:row + n] = torch.tensor(s.tokens[first:])
            pos[row:row + n] = torch.arange(s.start_pos + first, s.start_pos + len(s.tokens)) + page.offset
            vis = torch.cat([page.anc[sid], torch.tensor(page.slots[sid], dtype=torch.long)])
            spans.append(Span(page.pid, row, n, tree, vis))
            if tree:
                ids[row + n:row + n + d] = torch.tensor(tree.tokens)
                pos[row + n:row + n + d] = s.start_pos + len(s.tokens) - 1 + page.offset + torch.tensor(tree.depths())
            slots = self.arena.reserve(n + d, page.pid)
            page.slots[sid].extend(slots[:n])
            draft_slots.append(slots[n:])
            keep.extend(range(row + n - 1, row + n + d))
            row += n + d
        owned = page_slots(self.arena.owner, base)
        real = sum(r * k for r, k in page_sizes(spans, owned))
        extra = {"hidden": True} if self._hidden else {}
        if (rows := self.policy.in_forward) is not None:  # a drafter's rows (PTP's placeholders)
            extra["placeholders"] = rows
        if (blocked := self._use_blocks(spans, real, n_new * (base + n_new))):
            pages = page_batch(spans, owned, base, self.cfg.bucket_ratio)
            self.attention_stats.add(real, pages.padded, len(pages.buckets))
            attn, t_forward = pages.padded, pass_log.clock()
            out = self.model.step(ids, pos, None, self.arena.cache, keep=torch.tensor(keep), pages=pages, **extra)
        else:
            self.attention_stats.add(real, n_new * (base + n_new))
            mask = dense_mask(spans, base, n_new)
            attn, t_forward = n_new * (base + n_new), pass_log.clock()
            out = self.model.step(ids, pos, mask, self.arena.cache, keep=torch.tensor(keep), **extra)
        forward = pass_log.since(t_forward)
        logits, hidden = out if self._hidden else (out, None)
        self.forward_passes += 1
        touched: dict[int, list[int]] = {}
        at = 0
        for (page, sid, _, tree), dslots in zip(work, draft_slots):
            d = len(tree) if tree else 0
            rows = logits[at:at + 1 + d]  # after the stream's last token, then after each draft node
            at += 1 + d
            choices = self._choose(page, sid, tree, rows)
            verdict = self.policy.accept(tree, choices, rows) if tree else Verdict([], choices[:1])
            verdict.choices = choices
            if tree:
                self.policy.observe(page.graph, sid, page.sample, tree, verdict)
            self.arena.free([sl for i, sl in enumerate(dslots) if i not in verdict.nodes])
            page.drafted += d - tree.scratch if tree else 0
            page.accepted += len(verdict.nodes)
            if tree:
                page.count_depths(tree, len(verdict.nodes))
            if hidden is not None:  # the row that chose the stream's new last token: after its last accepted node
                page.hidden[sid] = hidden[at - 1 - d + (1 + verdict.nodes[-1] if verdict.nodes else 0)]
            touched.setdefault(page.pid, []).append(sid)
            self._extend(page, sid, verdict.tokens, [dslots[i] for i in verdict.nodes])
        for page in self.active:
            if page.pid in touched:
                page.steps += 1
                page.timeline.append(touched[page.pid])
        self._maybe_compact()
        if self.log is not None:
            self.log.add_step(len(touched), n_new, attn, forward, time.perf_counter() - t_step, blocked)

    def _use_blocks(self, spans: list[Span], real: int, dense: int) -> bool:
        if not self._blocks or spans[0].page == spans[-1].page:  # one page: the dense mask is its block
            return False
        return self.cfg.attention == "blocked" or dense > self.cfg.dense_waste * real

    def _choose(self, page: _Page, sid: int, tree: DraftTree | None, logits: torch.Tensor) -> list[int]:
        """Greedy token after the stream's last token (row 0) and after each draft node (a forced
        model's: the page's ground truth, `treedec.engine.forced`)."""
        if page.forced is not None:
            return page.forced.choose(page.graph, sid, tree)
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

    def _emit(self, page: _Page, sid: int, logits: torch.Tensor) -> None:
        """The first token of a stream after prefill."""
        self._extend(page, sid, self._choose(page, sid, None, logits[None]), [])

    def _extend(self, page: _Page, sid: int, tokens: list[int], kv_slots: list[int]) -> None:
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
            for fork in take_token(g, sid, token, self.policy, self.cfg, page.flags):
                self._fork(page, fork)
            if not s.live:
                self.arena.free(kv_slots[j + 1:])
                self._free_finished(page)
                return

    def _fork(self, page: _Page, fork: Fork) -> None:
        g = page.graph
        if not may_fork(g, self.cfg.max_branches, page.flags):
            return
        parent_slots = page.slots[fork.parent]
        if fork.at > len(parent_slots):
            raise ValueError(f"fork at {fork.at} beyond the {len(parent_slots)} tokens of stream {fork.parent} with KV")
        child = g.fork(fork.parent, fork.at, fork.first, fork.label)
        page.slots[child.id] = []
        page.anc[child.id] = torch.cat([page.anc[fork.parent], torch.tensor(parent_slots[:fork.at], dtype=torch.long)])

    # ------------------------------------------------------------------ freeing
    def _free_finished(self, page: _Page) -> None:
        """Free the KV no live stream can see any more: a finished stream keeps only the
        prefix its live descendants fork from."""
        g = page.graph
        need: dict[int, int] = {}
        for s in g.live():  # every live stream needs its ancestors up to the fork points
            for a, end in g.ancestors(s.id)[:-1]:
                need[a] = max(need.get(a, 0), end)
        for s in g.streams:
            if not s.live:
                keep = need.get(s.id, 0)
                if len(page.slots[s.id]) > keep:
                    self.arena.free(page.slots[s.id][keep:])
                    del page.slots[s.id][keep:]

    def _maybe_compact(self) -> None:
        a = self.arena
        if a.size < self.cfg.compact_min or a.owner.count(-1) < self.cfg.compact_ratio * a.size:
            return
        remap = a.compact()
        if remap is None:
            return
        for page in self.active:
            for sid in page.slots:
                page.slots[sid] = remap[torch.tensor(page.slots[sid], dtype=torch.long)].tolist() if page.slots[sid] else []
                page.anc[sid] = remap[page.anc[sid]] if len(page.anc[sid]) else page.anc[sid]

    def _retire(self, page: _Page) -> PageResult:
        self.active.remove(page)
        self.arena.free([i for sl in page.slots.values() for i in sl])
        page.slots.clear()
        page.hidden.clear()
        now = time.perf_counter()
        return PageResult(page.name, page.graph, page.steps, now - page.t_admit, page.t_admit - page.t_submit,
                          page.flags, page.timeline, page.sample, page.drafted, page.accepted, page.by_depth)
