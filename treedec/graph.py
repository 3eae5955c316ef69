"""The decoding graph: one page = one tree of token streams.

A stream has a parent and a fork point. A token sees exactly its ancestors: the
earlier tokens of its own stream and, for each ancestor stream, the tokens before
the point where the path to it forked. A child's first token takes the position of
the parent token it forks at (HPD: `<CHILD>` is fed at the `<FORK>`'s position and
the `<FORK>` itself stays invisible to the child).

Plain data: no torch, no model. The engine builds masks and KV layouts from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

LIVE, FINISHED, CUT = "live", "finished", "cut"


@dataclass
class Stream:
    id: int
    parent: int | None
    fork_at: int  # parent tokens [0, fork_at) are visible; the child starts at the position of parent token fork_at
    start_pos: int  # position of tokens[0]
    tokens: list[int] = field(default_factory=list)
    prompt_len: int = 0  # leading tokens known when the stream was made (not generated)
    status: str = LIVE
    reason: str = ""  # why it finished or was cut
    label: str = ""

    @property
    def generated(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def next_pos(self) -> int:
        return self.start_pos + len(self.tokens)

    @property
    def live(self) -> bool:
        return self.status == LIVE


class DecodingGraph:
    """Streams of one page. Verbs: `root`, `fork`, `append`, `finish`; queries:
    `ancestors`, `visible`, `can_see`, `context`, `positions`, `critical_path`, `flatten`."""

    def __init__(self) -> None:
        self.streams: list[Stream] = []
        self._children: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.streams)

    def __getitem__(self, sid: int) -> Stream:
        return self.streams[sid]

    # ---------------------------------------------------------------- verbs
    def root(self, prompt: Iterable[int], label: str = "root") -> Stream:
        if self.streams:
            raise ValueError("graph already has a root")
        prompt = list(prompt)
        s = Stream(id=0, parent=None, fork_at=0, start_pos=0, tokens=prompt, prompt_len=len(prompt), label=label)
        self.streams.append(s)
        self._children[0] = []
        return s

    def fork(self, parent: int, at: int, first: Iterable[int] = (), label: str = "") -> Stream:
        """Start a child of `parent` that sees parent tokens [0, at) and whose first token
        takes the position of parent token `at` (which may not exist yet: forking at the
        parent's end is allowed). `first` are tokens known at fork time (e.g. `<CHILD>`)."""
        p = self.streams[parent]
        if not 0 <= at <= len(p.tokens):
            raise ValueError(f"fork point {at} outside stream {parent} of {len(p.tokens)} tokens")
        first = list(first)
        s = Stream(id=len(self.streams), parent=parent, fork_at=at, start_pos=p.start_pos + at,
                   tokens=first, prompt_len=len(first), label=label)
        self.streams.append(s)
        self._children[parent].append(s.id)
        self._children[s.id] = []
        return s

    def append(self, sid: int, tokens: Iterable[int]) -> None:
        s = self.streams[sid]
        if not s.live:
            raise ValueError(f"stream {sid} is {s.status}, cannot append")
        s.tokens.extend(tokens)

    def finish(self, sid: int, reason: str = "eos", cut: bool = False) -> None:
        s = self.streams[sid]
        s.status, s.reason = (CUT if cut else FINISHED), reason

    # ---------------------------------------------------------------- queries
    def children(self, sid: int) -> list[int]:
        return list(self._children[sid])

    def live(self) -> list[Stream]:
        return [s for s in self.streams if s.live]

    @property
    def done(self) -> bool:
        return bool(self.streams) and not self.live()

    def ancestors(self, sid: int) -> list[tuple[int, int]]:
        """(stream, visible length) from the root down to `sid` itself (whole length)."""
        chain: list[tuple[int, int]] = []
        s = self.streams[sid]
        end = len(s.tokens)
        while True:
            chain.append((s.id, end))
            if s.parent is None:
                break
            end = s.fork_at
            s = self.streams[s.parent]
        return chain[::-1]

    def visible(self, sid: int) -> list[tuple[int, int, int]]:
        """Segments (stream, start, end) of the tokens the next token of `sid` sees."""
        return [(a, 0, end) for a, end in self.ancestors(sid)]

    def can_see(self, q_sid: int, q_idx: int, k_sid: int, k_idx: int) -> bool:
        """Does token `q_idx` of stream `q_sid` attend to token `k_idx` of stream `k_sid`?"""
        if q_sid == k_sid:
            return k_idx <= q_idx
        for a, end in self.ancestors(q_sid)[:-1]:
            if a == k_sid:
                return k_idx < end
        return False

    def context(self, sid: int) -> list[int]:
        """All tokens `sid`'s next token sees, in position order (its ancestor prompt)."""
        out: list[int] = []
        for a, end in self.ancestors(sid):
            out.extend(self.streams[a].tokens[:end])
        return out

    def positions(self, sid: int) -> range:
        s = self.streams[sid]
        return range(s.start_pos, s.start_pos + len(s.tokens))

    def gen_steps(self, sid: int) -> list[int]:
        """Decoding step (1-based) at which each token of `sid` is produced when every live
        stream makes one token per step; 0 for tokens known in advance (prompts)."""
        s = self.streams[sid]
        if s.parent is None:
            base = 0
        else:
            parent_steps = self.gen_steps(s.parent)
            # the child starts once the parent token at the fork point exists
            base = parent_steps[s.fork_at] if s.fork_at < len(parent_steps) else (parent_steps[-1] if parent_steps else 0)
        return [0] * s.prompt_len + [base + 1 + j for j in range(s.generated)]

    def critical_path(self) -> int:
        """Forward steps on the page's critical path at one token per stream per step."""
        return max((max(self.gen_steps(s.id), default=0) for s in self.streams), default=0)

    def total_generated(self) -> int:
        """Forward steps a single sequential stream would need for the same tokens."""
        return sum(s.generated for s in self.streams)

    def flatten(self, sid: int = 0, drop_tail: Iterable[int] = (), replace_fork_token: bool = True,
                nested_drop_head: Iterable[int] = ()) -> list[int]:
        """Splice each child in place of the parent token it forks at (recursively, in
        creation order), dropping a trailing token of the child that is in `drop_tail`
        (e.g. its `<eos>`) and, for children of children, a leading token in
        `nested_drop_head`. The prompt of the root is not included."""
        return self._flatten(sid, set(drop_tail), set(nested_drop_head), replace_fork_token, include_prompt=sid != 0)

    def settled(self, drop_tail: Iterable[int] = (), nested_drop_head: Iterable[int] = ()) -> list[int]:
        """The part of `flatten()` (fork tokens replaced) that no later token can change while the
        page decodes: everything up to the first stream still decoding, that stream's tokens but
        its last (a fork rule may still replace it). The whole of `flatten()` once the page is done."""
        return self._settled(0, set(drop_tail), set(nested_drop_head), include_prompt=False)[0]

    def _settled(self, sid: int, drop: set[int], drop_head: set[int], include_prompt: bool) -> tuple[list[int], bool]:
        """(`_flatten`'s tokens up to the first live stream, whether the stream was whole)."""
        s = self.streams[sid]
        by_point: dict[int, list[int]] = {}
        for c in self._children[sid]:
            by_point.setdefault(self.streams[c].fork_at, []).append(c)
        out: list[int] = []
        end = len(s.tokens) - (1 if s.live else 0)
        for i in range(0 if include_prompt else s.prompt_len, end + 1):
            kids = by_point.get(i, [])
            for c in kids:
                sub, whole = self._settled(c, drop, drop_head, include_prompt=True)
                if whole and sub and sub[-1] in drop:
                    sub = sub[:-1]
                if sub and s.parent is not None and sub[0] in drop_head:
                    sub = sub[1:]
                out.extend(sub)
                if not whole:
                    return out, False
            if i < end and not kids:
                out.append(s.tokens[i])
        return out, not s.live

    def _flatten(self, sid: int, drop: set[int], drop_head: set[int], replace: bool, include_prompt: bool) -> list[int]:
        s = self.streams[sid]
        by_point: dict[int, list[int]] = {}
        for c in self._children[sid]:
            by_point.setdefault(self.streams[c].fork_at, []).append(c)
        out: list[int] = []
        start = 0 if include_prompt else s.prompt_len
        for i in range(start, len(s.tokens) + 1):
            kids = by_point.get(i, [])
            for c in kids:
                sub = self._flatten(c, drop, drop_head, replace, include_prompt=True)
                if sub and sub[-1] in drop:
                    sub = sub[:-1]
                if sub and s.parent is not None and sub[0] in drop_head:
                    sub = sub[1:]
                out.extend(sub)
            if i < len(s.tokens) and not (kids and replace):
                out.append(s.tokens[i])
        return out
