"""HSD behind the API: each request drafted from its own image by the pipeline drafter, in the
request's format, before it joins the engine.

What a request's draft is follows from the prompt mode it asks in (`treedec.serve.prompts`):

- a page (`flat`, or a fork strategy's `tree`): the draft page, drafted as a batch run drafts a
  page (`PageDraftDrafter`: the flat form, or the layout stream and a branch per region);
- a layout pass (`layout`: MinerU's `Layout Detection:`): the draft page's layout as the format's
  layout pass writes it;
- a crop (`crop`: MinerU's `Text Recognition:` ...): the draft of the crop itself, as the format's
  crop read writes it: its blocks' text together, and each block alone, as alternatives;
- a prompt no mode matches: no drafts (it decodes as it would without them).

Drafting runs in `workers` processes beside the engine (`strategy.draft_workers`), or in one
thread of the server's process; the engine steps the other requests meanwhile. Published HSD
reads each draft region's crop first (stage 1) and drafts the page from those readings; a server
request is one page or one crop, decoded once from the pipeline's drafts (what stage 1 is to a
crop request), so there is no stage 1 here."""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor

from treedec.drafters.page_drafts import PageDraftDrafter, SequenceDrafter
from treedec.engine.draft import DraftRequest, DraftTree, Verdict
from treedec.formats import Format
from treedec.graph import DecodingGraph
from treedec.ocr.drafters import Drafters, draft_one, run_in_pool
from treedec.page import Block, Page
from treedec.strategies.hsd import fitted
from treedec.strategies.hsd_stage1 import crop_draft, model_grid

DEFAULT_CATEGORY = "text_block"  # a crop asked with the format's default crop prompt


class RequestDrafts:
    """The served strategy's draft source: each request's drafts, by its name, handed over before
    it is queued (`use_sequences`: a layout pass, a crop; `use_page`: a page) and forgotten when
    it is answered. Its capabilities are a page drafter's."""
    trees, needs_hidden, pages_ahead, drafts_in_forward = True, False, True, False

    def __init__(self, sequences: SequenceDrafter, pages: PageDraftDrafter):
        self.seqs, self.pages = sequences, pages
        self.matcher, self.depth = pages.matcher, pages.depth
        self.step_only = pages.step_only

    def for_run(self, vlm) -> "RequestDrafts":
        return self  # the server's one engine run: its requests' drafts handed to this source

    def use_sequences(self, name: str, seqs: list[list[int]]) -> None:
        self.seqs.use(name, seqs)

    def use_page(self, name: str, page: Page, grid: int | None) -> None:
        self.pages.use(name, page, grid)

    def forget(self, name: str) -> None:
        self.seqs.seqs.pop(name, None)
        self.pages.pages.pop(name, None)
        self.pages.grids.pop(name, None)
        self.pages._seqs.pop(name, None)

    def propose_many(self, requests: list[DraftRequest]) -> list[DraftTree | None]:
        return [(self.seqs if r[2].name in self.seqs.seqs else self.pages).propose(*r) for r in requests]

    def observe(self, graph: DecodingGraph, sid: int, sample, tree: DraftTree, verdict: Verdict) -> None:
        pass


class RequestDrafter:
    """Drafts a request's image with the pipeline drafter (`ocr`: its config) and hands the
    drafts to the strategy's `RequestDrafts` in the form the request's mode reads."""

    def __init__(self, source: RequestDrafts, fmt: Format, tok, ocr, workers: int = 0, snap: bool = True,
                 noise: float = 0.0):
        self.source, self.fmt, self.tok, self.ocr, self.snap, self.noise = source, fmt, tok, ocr, snap, noise
        self.drafters = Drafters()
        self.workers = workers
        self._thread: Executor | None = ThreadPoolExecutor(1, thread_name_prefix="treedec-drafter") if not workers \
            else None

    def warm(self) -> None:
        """Load the drafter's models now (the first request would wait for them)."""
        if self.workers:
            self.drafters.pool(self.workers, self.ocr)
        else:
            self.drafters.here(self.ocr)._load()

    async def draft(self, name: str, image) -> tuple[Page, float]:
        """The request's draft page and the CPU seconds drafting it took."""
        loop = asyncio.get_running_loop()
        if self.workers:
            future = run_in_pool(self.drafters.pool(self.workers, self.ocr), image, name)
            data, cost = await asyncio.wrap_future(future)
        else:
            data, cost = await loop.run_in_executor(self._thread, draft_one, self.drafters.here(self.ocr), image, name)
        from treedec.io.omnidocbench import page_from_omnidocbench

        return page_from_omnidocbench(data), cost.cpu_s

    def hand_over(self, name: str, vlm, image, page: Page, mode: str | None, category: str | None) -> int:
        """The draft of a request asked in `mode` handed to the source; the draft tokens it holds."""
        if mode in ("flat", "tree"):
            grid = model_grid(vlm, image) if self.snap else None
            page = fitted({name: page}, "pipeline", {name: grid} if grid else {}, self.noise)[name]
            self.source.use_page(name, page, grid)
            return sum(len(s) for s in self.source.pages.sequences([name], []))
        if mode == "layout":
            seqs = [self.fmt.encode(self.tok, self.fmt.render_layout(page))]
        elif mode == "crop":
            seqs = crop_sequences(page, self.fmt, self.tok, category or DEFAULT_CATEGORY)
        else:
            return 0
        self.source.use_sequences(name, seqs)
        return sum(len(s) for s in seqs)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
        self.drafters.close()


def crop_sequences(page: Page, fmt: Format, tok, category: str) -> list[list[int]]:
    """A crop's draft (the pipeline's page of the crop) as the format's crop read of a `category`
    region: every block's text together, then each block alone (alternatives)."""
    blocks = [b for b in page.reading_order() if b.content]
    if not blocks:
        return []
    same = [b for b in blocks if b.category == category]
    whole = Block(category, (0.0, 0.0, float(page.width), float(page.height)),
                  "\n".join(b.content for b in (same or blocks)))
    seqs = [crop_draft(tok, fmt, whole, "crop")]
    for b in blocks:
        seq = crop_draft(tok, fmt, Block(category if b.category not in ("table", "equation_isolated") else b.category,
                                         b.bbox, b.content), "crop")
        if seq not in seqs:
            seqs.append(seq)
    return seqs
