"""A page in the engine's flight: its decoding record (`PageDecoding`, what every runtime fills)
and, beside it, what only this engine keeps: the KV slots of each stream in the shared arena,
the hidden state a drafter reads, the forced model's choice."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from treedec.engine.forced import ForcedChoice
from treedec.engine.limits import PageLimits
from treedec.engine.sampling import PageSampler
from treedec.engine.page_decoding import PageDecoding
from treedec.graph import DecodingGraph


@dataclass(kw_only=True)
class PageKV:
    record: PageDecoding
    pid: int  # the page's owner id in the KV arena
    offset: int = 0  # added to the graph positions the model sees (Prompt.position_offset)
    slots: dict[int, list[int]] = field(default_factory=dict)  # stream -> KV slot of each of its tokens
    anc: dict[int, torch.Tensor] = field(default_factory=dict)  # stream -> slots of its ancestors' visible prefixes
    hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # stream -> StreamState.hidden (needs_hidden)
    forced: ForcedChoice | None = None  # a forced model's: tokens chosen from the page's ground truth
    limits: PageLimits | None = None  # the page's own (a served request's max_tokens); None: the engine's
    sampler: PageSampler | None = None  # the page's own token choice (a request's sampling fields); None: greedy
    forks: bool = True  # the strategy's fork rule asked on its tokens (PageOptions.forks)

    @property
    def graph(self) -> DecodingGraph:
        return self.record.graph

    def visible(self, sid: int) -> torch.Tensor:
        """The KV slots stream `sid` sees: its ancestors' prefixes, then its own tokens'."""
        return torch.cat([self.anc[sid], torch.tensor(self.slots[sid], dtype=torch.long)])

    def fork(self, parent: int, at: int, child: int) -> None:
        """Stream `child` sees `parent`'s first `at` tokens (and what `parent` sees)."""
        if at > len(self.slots[parent]):
            raise ValueError(f"fork at {at} beyond the {len(self.slots[parent])} tokens of stream {parent} with KV")
        self.slots[child] = []
        self.anc[child] = torch.cat([self.anc[parent], torch.tensor(self.slots[parent][:at], dtype=torch.long)])

    def unseen(self) -> list[int]:
        """The slots no live stream can see any more, dropped: a finished stream keeps only the
        prefix its live descendants fork from."""
        g = self.graph
        need: dict[int, int] = {}
        for s in g.live():  # every live stream needs its ancestors up to the fork points
            for a, end in g.ancestors(s.id)[:-1]:
                need[a] = max(need.get(a, 0), end)
        out: list[int] = []
        for s in g.streams:
            keep = need.get(s.id, 0)
            if not s.live and len(self.slots[s.id]) > keep:
                out += self.slots[s.id][keep:]
                del self.slots[s.id][keep:]
        return out

    def remap(self, remap: torch.Tensor) -> None:
        """Every slot moved to `remap[slot]` (the arena compacted)."""
        for sid in self.slots:
            self.slots[sid] = remap[torch.tensor(self.slots[sid], dtype=torch.long)].tolist() if self.slots[sid] else []
            self.anc[sid] = remap[self.anc[sid]] if len(self.anc[sid]) else self.anc[sid]

    def release(self) -> list[int]:
        """Every slot the page holds, dropped with its hidden states (the page leaves)."""
        out = [i for sl in self.slots.values() for i in sl]
        self.slots.clear()
        self.hidden.clear()
        return out
