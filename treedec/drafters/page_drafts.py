"""Draft trees for every stream of a page from one draft `Page` (a pipeline OCR's, or
HSD stage 1's refined one): the flat stream matches the draft's flat form, the layout
stream its tree-form layout, and a content branch the draft region that best overlaps
the box the layout stream gave it (proposed whole at the start, matched n-gram-wise after)."""
from __future__ import annotations

import re

from treedec.drafters.ngram import NgramMatcher
from treedec.engine.draft import DraftTree
from treedec.graph import DecodingGraph
from treedec.metrics.layout import iou
from treedec.page import Page
from treedec.serialize import BLOCK, box_to_text, page_to_flat, page_to_tree
from treedec.tokenizer import Tokenizer

_BOX = re.compile(r"\[(\d+),(\d+),(\d+),(\d+)\]")


def continue_draft(own: list[int], draft: list[int], matcher: NgramMatcher) -> DraftTree | None:
    """Draft for a stream that has produced `own` and is expected to follow `draft`: while
    `own` is shorter than the match window, continue the draft if it starts alike; after
    that, n-gram matching."""
    if len(own) < matcher.w_min:
        n = len(own)
        return DraftTree.chain(draft[n:n + matcher.max_depth]) if draft[:n] == own and draft[n:] else None
    return matcher.propose(own[-matcher.w_max:], [draft])


class SequenceDrafter:
    """A `Drafter` for single-stream outputs with one known draft sequence per sample name."""

    def __init__(self, matcher: NgramMatcher | None = None):
        self.matcher = matcher or NgramMatcher()
        self.seqs: dict[str, list[int]] = {}

    def propose(self, graph: DecodingGraph, sid: int, sample) -> DraftTree | None:
        draft = self.seqs.get(getattr(sample, "name", ""))
        s = graph[sid]
        return continue_draft(s.tokens[s.prompt_len:], draft, self.matcher) if draft else None


class _PageSeqs:
    """Token sequences of one draft page."""

    def __init__(self, page: Page, tok: Tokenizer):
        self.flat = tok.encode(page_to_flat(page))
        self.layout = tok.encode(page_to_tree(page).layout)
        self.regions = []  # (box in 0-1000 ints, branch tokens <CHILD>content<eos>)
        for b in page.reading_order():
            box = tuple(int(v) for v in _BOX.match(box_to_text(b.bbox, page.width, page.height)).groups())
            self.regions.append((box, [tok.child_id] + tok.encode(b.content) + [tok.eos_id]))


class PageDraftDrafter:
    """A `Drafter` over per-page draft `Page`s, keyed by sample name (`pages`)."""

    def __init__(self, tok: Tokenizer, form: str, matcher: NgramMatcher | None = None, min_iou: float = 0.3):
        if form not in ("flat", "tree"):
            raise ValueError(f"form must be flat or tree, got {form!r}")
        self.tok, self.form, self.matcher, self.min_iou = tok, form, matcher or NgramMatcher(), min_iou
        self.pages: dict[str, Page] = {}
        self._seqs: dict[str, _PageSeqs] = {}

    def _for(self, name: str) -> _PageSeqs | None:
        if name not in self._seqs:
            if name not in self.pages:
                return None
            self._seqs[name] = _PageSeqs(self.pages[name], self.tok)
        return self._seqs[name]

    def propose(self, graph: DecodingGraph, sid: int, sample) -> DraftTree | None:
        seqs = self._for(getattr(sample, "name", ""))
        if seqs is None:
            return None
        s = graph[sid]
        if s.parent is None:  # the root: the flat form, or the layout stream of the tree form
            own, draft = s.tokens[s.prompt_len:], (seqs.layout if self.form == "tree" else seqs.flat)
        else:
            own, draft = s.tokens, self._region(graph, sid, seqs)  # a branch: <CHILD> + its tokens
            if draft is None:
                return None
        return continue_draft(own, draft, self.matcher)

    def _region(self, graph: DecodingGraph, sid: int, seqs: _PageSeqs) -> list[int] | None:
        """The draft region overlapping the box this branch's layout block announced."""
        s = graph[sid]
        parent = graph[s.parent]
        layout = self.tok.decode(parent.tokens[parent.prompt_len:s.fork_at])
        block = layout.rsplit(BLOCK, 1)[-1]
        m = _BOX.search(block)
        if not m:
            return None
        box = tuple(int(v) for v in m.groups())
        best = max(seqs.regions, key=lambda r: iou(box, r[0]), default=None)
        return best[1] if best is not None and iou(box, best[0]) >= self.min_iou else None
