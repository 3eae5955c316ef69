"""The embedded engine: decodes a batch of page trees, one flat forward per step.

Each step gathers every live stream of every active page (its pending tokens) into one
flat batch: token ids, positions from the decoding graph (plus the page's
`Prompt.position_offset`), and an additive ancestor mask over the shared KV arena built
from parent pointers. Prefixes are stored once. Pages join (prefill) and leave (KV freed)
between steps, bounded by `max_pages` and a KV token budget. A page cut by a limit is
flagged, never dropped.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from treedec.engine.draft import DraftTree, StreamState, Verdict
from treedec.engine.kv import KVArena
from treedec.engine.policy import Fork, Policy
from treedec.engine.rules import may_fork, take_token
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.adapter import CausalLMAdapter, Prompt

NEG_INF = float("-inf")


@dataclass
class EngineConfig:
    max_pages: int = 16  # pages decoded concurrently
    max_kv_tokens: int = 1 << 20  # KV slots over all active pages
    max_new_tokens: int = 2048  # per stream
    max_branches: int = 512  # streams per page
    compact_min: int = 2048  # compact the arena when it has this many slots ...
    compact_ratio: float = 0.5  # ... and this fraction of them is free
    # attention of a step: dense (one mask over the whole arena) | blocked (each page's rows against its own KV,
    # as one padded batch) | auto: blocked when the step has at least `blocked_rows` rows per page (drafts), where it
    # is cheaper (experiments/bench_attention_step.py, 16 pages x 400 slots, 2 CPU threads, dense vs blocked ms:
    # 1 row each 11.6-13.2 vs 12.1-29.4, 4: 23.2-25.2 vs 30.5-33.1, 8: 39.0 vs 39.7, 16: 57.5-64.6 vs 45.5-51.9;
    # whole padoc_hsd runs, 16 in flight: blocked 1.2x the pages/s of dense)
    attention: str = "auto"
    blocked_rows: float = 4.0


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
        deepest = max(tree.depths(), default=0)
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
    hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # stream -> StreamState.hidden (wants_hidden)


Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # HF LogitsProcessor: (ids [1,T], scores [1,V])


class Engine:
    def __init__(self, model: CausalLMAdapter, policy: Policy, config: EngineConfig | None = None,
                 processors: Iterable[Processor] = ()):
        self.model, self.policy = model, policy
        self.cfg = config or EngineConfig()
        self.processors = list(processors)
        self.arena = KVArena()
        self.active: list[_Page] = []
        self._next_pid = 0
        self.forward_passes = 0
        self._observe = getattr(policy, "observe", None)  # optional: a drafter that learns from verdicts
        self._hidden = bool(getattr(policy, "wants_hidden", False))  # optional: drafters read hidden states
        if self.cfg.attention not in ("auto", "blocked", "dense"):
            raise UserError(f"runtime.attention must be auto, blocked or dense, got {self.cfg.attention!r}")
        self._blocks = self.cfg.attention != "dense" and getattr(model, "supports_blocks", False)

    # ------------------------------------------------------------------ public
    def run(self, items: Iterable[tuple[str, Prompt, Any]], on_done: Callable[[PageResult], None] | None = None
            ) -> Iterator[PageResult]:
        """Decode `(name, prompt, sample)` items with continuous batching; yields results
        as pages finish (completion order)."""
        queue = list(items)
        t0 = time.perf_counter()
        queue = [(name, prompt, sample, t0) for name, prompt, sample in queue]
        while queue or self.active:
            while queue and self._can_admit(len(queue[0][1].ids)):
                name, prompt, sample, t_sub = queue.pop(0)
                self._admit(name, prompt, sample, t_sub)
            if not self.active:
                name, prompt, sample, t_sub = queue.pop(0)  # over budget even alone: admit and let limits cut it
                self._admit(name, prompt, sample, t_sub)
            if any(p.graph.live() for p in self.active):
                self._step()
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
        if self._hidden:
            logits, kv, page.hidden[root.id] = self.model.prefill(prompt, hidden=True)
        else:
            logits, kv = self.model.prefill(prompt)
        self.forward_passes += 1
        page.slots[root.id] = self.arena.add_prefill(kv, page.pid)
        page.anc[root.id] = torch.empty(0, dtype=torch.long)
        page.steps = 1
        page.timeline.append([root.id])
        self.active.append(page)
        self._emit(page, root.id, logits)

    # ------------------------------------------------------------------ one step
    def _step(self) -> None:
        work: list[tuple[_Page, int, int, DraftTree | None]] = []  # (page, stream, first pending index, draft)
        for page in self.active:
            for s in page.graph.live():
                done = len(page.slots[s.id])
                if done < len(s.tokens):
                    state = StreamState(page.hidden.get(s.id))
                    tree = self.policy.draft(page.graph, s.id, page.sample, state)
                    work.append((page, s.id, done, tree if tree else None))
        if not work:
            return
        base = self.arena.size
        n_new = sum(len(p.graph[sid].tokens) - i + (len(t) if t else 0) for p, sid, i, t in work)
        ids = torch.empty(n_new, dtype=torch.long)
        pos = torch.empty(n_new, dtype=torch.long)
        mask = torch.full((n_new, base + n_new), NEG_INF)
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
            block = mask[row:row + n + d]
            block.index_fill_(1, vis, 0.0)
            new = base + row
            block[:n, new:new + n] = torch.triu(torch.full((n, n), NEG_INF), diagonal=1)
            block[n:, new:new + n] = 0.0  # draft nodes see every pending token ...
            if tree:  # ... and their own ancestors in the draft tree
                ids[row + n:row + n + d] = torch.tensor(tree.tokens)
                pos[row + n:row + n + d] = s.start_pos + len(s.tokens) - 1 + page.offset + torch.tensor(tree.depths())
                block[n:, new + n:new + n + d] = torch.zeros(d, d).masked_fill(~tree.ancestor_mask(), NEG_INF)
            slots = self.arena.reserve(n + d, page.pid)
            page.slots[sid].extend(slots[:n])
            draft_slots.append(slots[n:])
            keep.extend(range(row + n - 1, row + n + d))
            row += n + d
        extra = {"hidden": True} if self._hidden else {}
        if self._use_blocks(work, n_new):
            out = self.model.step(ids, pos, None, self.arena.cache, keep=torch.tensor(keep),
                                  pages=self._page_blocks(work, mask, base), **extra)
        else:
            out = self.model.step(ids, pos, mask, self.arena.cache, keep=torch.tensor(keep), **extra)
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
            if tree and self._observe is not None:
                self._observe(page.graph, sid, page.sample, tree, verdict)
            self.arena.free([sl for i, sl in enumerate(dslots) if i not in verdict.nodes])
            page.drafted += d
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

    def _use_blocks(self, work, n_new: int) -> bool:
        if not self._blocks or work[0][0] is work[-1][0]:  # one page: the dense mask is its block
            return False
        pages = len({p.pid for p, _, _, _ in work})
        return self.cfg.attention == "blocked" or n_new >= self.cfg.blocked_rows * pages

    def _page_blocks(self, work, mask: torch.Tensor, base: int):
        """This step's rows grouped by page (contiguous: work is gathered page by page), each
        with the keys it may see (its slots in the arena, then its new rows) and that slice
        of `mask`, as one padded batch."""
        from treedec.models.attention import PageBatch

        owner = torch.tensor(self.arena.owner[:base], dtype=torch.long)
        groups, row = [], 0
        for page, group in itertools.groupby(work, key=lambda w: w[0].pid):
            n = sum(len(p.graph[sid].tokens) - first + (len(t) if t else 0) for p, sid, first, t in group)
            keys = torch.cat([(owner == page).nonzero().flatten(), torch.arange(base + row, base + row + n)])
            groups.append((torch.arange(row, row + n), keys, mask[row:row + n].index_select(1, keys)))
            row += n
        return PageBatch.build(groups)

    def _choose(self, page: _Page, sid: int, tree: DraftTree | None, logits: torch.Tensor) -> list[int]:
        """Greedy token after the stream's last token (row 0) and after each draft node."""
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
        for j, token in enumerate(tokens):
            if j < len(kv_slots):  # the token's KV exists: its slot joins the stream before any fork reads it
                page.slots[sid].append(kv_slots[j])
            for fork in take_token(g, sid, token, self.policy, self.cfg.max_new_tokens, page.flags):
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
