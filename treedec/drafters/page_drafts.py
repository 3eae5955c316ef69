"""Draft trees for every stream of a page from its draft `Page`s (a pipeline OCR's, HSD
stage 1's refined one, or both as alternatives): the flat stream matches a draft's flat
form, the layout stream its tree-form layout, and a content branch the draft region that
best overlaps the box the layout stream gave it (proposed whole at the start, matched
n-gram-wise after). With several drafts the candidates of all of them form one tree."""
from __future__ import annotations

import re

from treedec.drafters.layout_lines import LayoutLines, layout_tree
from treedec.drafters.ngram import NgramMatcher, prefix_tree
from treedec.engine.draft import DraftRequest, DraftTree, StreamState, Verdict
from treedec.graph import DecodingGraph
from treedec.boxes import iou
from treedec.page import Page
from treedec.formats import Format, get_format
from treedec.formats.contract import BLOCK, FORK, box_to_text, coord
from treedec.tokenizer import Tokenizer

_BOX = re.compile(r"\[(\d+),(\d+),(\d+),(\d+)\]")


def continue_draft(own: list[int], drafts: list[list[int]], matcher: NgramMatcher) -> DraftTree | None:
    """Draft for a stream that has produced `own` and is expected to follow one of `drafts`:
    while `own` is shorter than the match window, continue the drafts that start alike;
    after that, n-gram matching over all of them."""
    if len(own) < matcher.w_min:
        n = len(own)
        return prefix_tree([d[n:n + matcher.max_depth] for d in drafts if d[:n] == own], matcher.max_nodes)
    return matcher.propose(own[-matcher.w_max:], drafts)


class SequenceDrafter:
    """A draft source for single-stream outputs with known draft sequences (alternatives) per
    sample name (HSD stage 1's crops), handed to the run's source before the sample is decoded
    (`use`)."""
    trees, needs_hidden, pages_ahead, drafts_in_forward = True, False, True, False
    step_only = ()

    def __init__(self, matcher: NgramMatcher | None = None):
        self.matcher = matcher or NgramMatcher()
        self.depth = self.matcher.max_depth
        self.seqs: dict[str, list[list[int]]] = {}

    def use(self, name: str, seqs: list[list[int]]) -> None:
        """Sample `name`'s draft sequences (alternatives)."""
        self.seqs[name] = seqs

    def for_run(self, vlm) -> "SequenceDrafter":
        return SequenceDrafter(self.matcher)

    def sequences(self, names: list[str], prompt_ids: list[int]) -> list[list[int]]:
        """The named samples' draft sequences, each headed by the prompt's last `w_max` tokens."""
        head = list(prompt_ids[-self.matcher.w_max:]) if self.matcher.w_max > 0 else []
        return [head + q for n in names for q in self.seqs.get(n, [])]

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return [self.propose(*r) for r in requests]

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        pass

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        drafts = self.seqs.get(sample.name)
        s = graph[sid]
        return continue_draft(s.tokens[s.prompt_len:], drafts, self.matcher) if drafts else None


def grid_values(tok: Tokenizer, page: Page, grid: int) -> list[list[tuple[int, ...]]]:
    """Per box field (x1, y1, x2, y2): the tokens of every serialized coordinate that lies on
    a model's patch grid of `grid` pixels on this page."""
    xs = [tuple(tok.encode(str(coord(v, page.width)))) for v in range(0, page.width + 1, grid)]
    ys = [tuple(tok.encode(str(coord(v, page.height)))) for v in range(0, page.height + 1, grid)]
    return [xs, ys, xs, ys]


class _PageSeqs:
    """Token sequences of one draft page: `root`, the form's root stream (the flat form, or
    the tree form's layout), as a sequence and, for `layout=lines`, as `lines` (`grid`: the
    model's patch grid on the page, or None)."""

    def __init__(self, page: Page, tok: Tokenizer, form: str, lines: bool, grid: int | None = None,
                 fmt: Format | None = None):
        self.root = root_ids(page, tok, form, fmt or get_format("treedec"))
        self.lines = LayoutLines.of(self.root, tok, grid_values(tok, page, grid) if grid else None) if lines else None
        self.regions = []  # (box in 0-1000 ints, branch tokens <CHILD>content<eos>): the tree form's branches
        for b in page.reading_order() if form == "tree" else ():
            box = tuple(int(v) for v in _BOX.match(box_to_text(b.bbox, page.width, page.height)).groups())
            self.regions.append((box, [tok.child_id] + tok.encode(b.content) + [tok.eos_id]))


class PageDraftDrafter:
    """A draft source over per-page drafts, keyed by sample name (`pages`: a draft `Page`, or a
    list of alternative drafts of the page; `grids`: the model's patch grid on the page,
    where it has one), handed to the run's source before the page is decoded (`use`).
    `layout`: how the root stream (the tree form's layout stream, the flat stream) is drafted:
    `ngram` (matching, as every other stream) or `lines` (line by line and field by field,
    `layout_lines`; n-gram matching where that proposes nothing)."""

    def __init__(self, tok: Tokenizer, form: str, matcher: NgramMatcher | None = None, min_iou: float = 0.3,
                 layout: str = "ngram"):
        if form not in ("flat", "tree"):
            raise ValueError(f"form must be flat or tree, got {form!r}")
        if layout not in ("ngram", "lines"):
            raise ValueError(f"layout must be ngram or lines, got {layout!r}")
        self.tok, self.form, self.matcher, self.min_iou, self.layout = tok, form, matcher or NgramMatcher(), min_iou, layout
        self.trees, self.needs_hidden, self.pages_ahead, self.depth = True, False, True, self.matcher.max_depth
        self.drafts_in_forward = False
        self.step_only = (("fuzzy draft matching (one token different)",) if self.matcher.fuzzy else ()) + \
            (("layout=lines (the root stream drafted line by line, field by field)",) if layout == "lines" else ())
        self.pages: dict[str, Page | list[Page]] = {}
        self.grids: dict[str, int] = {}
        self.fmt = get_format("treedec")  # drafts written as this format writes them (`Strategy.with_format`)
        self._seqs: dict[str, list[_PageSeqs]] = {}

    def _for(self, name: str) -> list[_PageSeqs]:
        if name not in self._seqs:
            if name not in self.pages:
                return []
            pages = self.pages[name]
            # line by line where the root's lines are `<BLOCK>` lines of treedec's tokens (a plain checkpoint's are not)
            grid, lines = self.grids.get(name), self.layout == "lines" and self.tok.treedec_tokens
            self._seqs[name] = [_PageSeqs(p, self.tok, self.form, lines, grid, self.fmt)
                                for p in (pages if isinstance(pages, list) else [pages])]
        return self._seqs[name]

    def use(self, name: str, pages: Page | list[Page], grid: int | None = None) -> None:
        """Page `name`'s drafts (a draft page, or alternatives) and the model's patch grid on it."""
        self.pages[name] = pages
        self._seqs.pop(name, None)
        if grid:
            self.grids[name] = grid

    def for_run(self, vlm) -> "PageDraftDrafter":
        run = PageDraftDrafter(self.tok, self.form, self.matcher, self.min_iou, self.layout)
        run.fmt = self.fmt
        return run

    def sequences(self, names: list[str], prompt_ids: list[int]) -> list[list[int]]:
        """The named pages' drafts as token sequences (`page_draft_sequences`; every alternative)."""
        drafts = [d for n in names if n in self.pages
                  for d in (self.pages[n] if isinstance(self.pages[n], list) else [self.pages[n]])]
        return page_draft_sequences(drafts, self.tok, self.form, prompt_ids, self.matcher.w_max, self.fmt)

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return [self.propose(*r) for r in requests]

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        pass

    def propose(self, graph: DecodingGraph, sid: int, sample, state: StreamState | None = None) -> DraftTree | None:
        alternatives = self._for(sample.name)
        if not alternatives:
            return None
        s = graph[sid]
        if s.parent is None:  # the root: the flat form, or the layout stream of the tree form
            own = s.tokens[s.prompt_len:]
            if all(a.lines is not None for a in alternatives):
                tree = layout_tree(own, [a.lines for a in alternatives], self.matcher.max_depth, self.matcher.max_nodes)
                if tree is not None:
                    return tree
            drafts = [a.root for a in alternatives]
        else:
            own, box = s.tokens, self._box(graph, sid)  # a branch: <CHILD> + its tokens
            drafts = [r for a in alternatives if (r := self._region(box, a)) is not None] if box else []
            tree = continue_draft(own, drafts, self.matcher) if drafts else None
            if tree is None and len(own) >= self.matcher.w_min:
                # its region's draft (if any) has no match: the page's other regions may (the
                # pipeline merged or split blocks, or put a box elsewhere)
                tree = self.matcher.propose(own[-self.matcher.w_max:], [r for a in alternatives for _, r in a.regions])
            return tree
        return continue_draft(own, drafts, self.matcher)

    def _box(self, graph: DecodingGraph, sid: int) -> tuple[int, ...] | None:
        """The box this branch's layout block announced (0-1000 ints)."""
        s = graph[sid]
        parent = graph[s.parent]
        block = self.tok.decode(parent.tokens[parent.prompt_len:s.fork_at]).rsplit(BLOCK, 1)[-1]
        m = _BOX.search(block)
        return tuple(int(v) for v in m.groups()) if m else None

    def _region(self, box: tuple[int, ...], seqs: _PageSeqs) -> list[int] | None:
        """The draft region that best overlaps `box` (IoU >= min_iou)."""
        best = max(seqs.regions, key=lambda r: iou(box, r[0]), default=None)
        return best[1] if best is not None and iou(box, best[0]) >= self.min_iou else None


def root_ids(page: Page, tok: Tokenizer, form: str, fmt: Format) -> list[int]:
    """A draft page's root stream as `fmt` writes it: the flat form, or the tree form's layout."""
    return fmt.encode(tok, fmt.render(page) if form == "flat" else fmt.render_tree(page).layout)


def page_draft_sequences(pages, tok: Tokenizer, form: str, prompt_ids: list[int], w_max: int,
                         fmt: Format | None = None) -> list[list[int]]:
    """Draft `Page`s as the token sequences a matcher over fixed sequences reads (vLLM's
    proposer, `treedec.runtimes.vllm.drafts`): one root sequence per page (`form` flat: the
    flat form; tree: the layout) headed by the prompt's last `w_max` tokens, and for the tree
    form one sequence per draft region (its layout line, `<CHILD>`, content, `<eos>`)."""
    fmt = fmt or get_format("treedec")
    head = list(prompt_ids[-w_max:]) if w_max > 0 else []
    out: list[list[int]] = []
    for page in pages:
        out.append(head + root_ids(page, tok, form, fmt))
        if form == "flat":
            continue
        tree = fmt.render_tree(page)  # each branch after its block's layout line (the text before its <FORK>)
        for before, branch in zip(tree.layout.split(FORK), tree.branches):
            out.append(fmt.encode(tok, BLOCK + before.rsplit(BLOCK, 1)[-1] + branch))
    return out
