"""Crops: the decoupled two-stage parse of MinerU2.5 and PaddleOCR-VL, built from treedec's
parts, the baseline users pick today instead of a tree decode.

Stage 1 is the model's layout pass on the whole page: PaDoc's layout stream (prompt mode
`tree`) decoded alone, no branch forked, so its tokens are those of `padoc`'s layout stream.
Stage 2 (`Strategy.after_decode`): every region of that layout whose category holds content
is cut from the page (`stage1_crop`, HSD's stage-1 crop: on the model's patch grid where it
has one) and read in prompt mode `crop`; the crops of the pages decoded so far run as one
batch. Each reading is spliced into the page as a branch of its region's `<FORK>`, so the
page reads as any tree decode's (flat text, streams, timeline), and its critical path is
the layout's steps plus its longest crop's (the crops of a page run in parallel). A page's
latency runs to its last crop's reading; the run's `forward_passes` counts the layout
engine's passes and those of the crops' engines. Embedded runtime only: the vLLM runtime
refuses it in one line.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Iterator

from treedec.data.synth import Sample
from treedec.engine.engine import Engine, PageResult
from treedec.graph import DecodingGraph
from treedec.page import Page
from treedec.serialize import BLOCK, CHILD, EOS, block_layout, parse_flat
from treedec.strategies.base import STRATEGIES, Strategy
from treedec.strategies.crop_read import UNREAD, crop_target, region_truth
from treedec.strategies.hsd import model_grid, stage1_crop
from treedec.tokenizer import Tokenizer

if TYPE_CHECKING:
    from treedec.runtimes.embedded import EmbeddedRuntime

def crops_target(page: Page, tok: Tokenizer, prompt: list[int]) -> DecodingGraph:
    """The ground truth as the two stages decode it: the layout stream (`<FORK>` per region),
    then each region's content as a branch that starts after the whole layout, so the
    critical path is l(B) + max_k l(Y_k) (oracle depth). Training on it trains the layout
    pass; reading crops is the crop task every training run has (`crop_examples`)."""
    g = DecodingGraph()
    root = g.root(prompt)
    blocks = page.reading_order()
    g.append(root.id, [t for b in blocks for t in tok.encode(block_layout(b, page.width, page.height)) + [tok.fork_id]]
             + [tok.eos_id])
    g.finish(root.id)
    for k, b in enumerate(blocks):
        if b.category not in UNREAD:
            child = g.fork(root.id, at=len(root.tokens), first=[tok.child_id], label=f"crop {k + 1}")
            g.append(child.id, tok.encode(b.content) + [tok.eos_id])
            g.finish(child.id)
    return g


class ReadCrops:
    """The step after the layout pass (`Strategy.after_decode`): pages pass through as they
    are decoded; every `chunk` of them (at least the engine's pages in flight) has its
    regions read from their crops in one batch, and comes out with the readings spliced in."""

    def __init__(self, tok: Tokenizer, chunk: int | None):
        self.tok, self.chunk = tok, chunk
        self.reader = Strategy("crops_read", "crop", tok, crop_target)

    def __call__(self, vlm, results: Iterable[PageResult], runtime: EmbeddedRuntime, progress: bool = True
                 ) -> Iterator[PageResult]:
        """`results`: the layout pass of `runtime`, which the crops' forwards are counted to."""
        held: list[tuple[PageResult, float]] = []  # (page, when its layout was done)
        for r in results:
            held.append((r, time.perf_counter()))
            if len(held) >= (self.chunk or runtime.cfg.max_pages):
                yield from self._read(vlm, held, runtime)
                held = []
        if held:
            yield from self._read(vlm, held, runtime)

    def _read(self, vlm, held: list[tuple[PageResult, float]], runtime: EmbeddedRuntime) -> list[PageResult]:
        engine_cfg = runtime.cfg
        jobs = [(r, at, s) for r, _ in held for at, s in self.regions(vlm, r)]
        per_page = max((sum(1 for j in jobs if j[0] is r) for r, _ in held), default=1)
        cfg = replace(engine_cfg, max_pages=max(1, per_page * engine_cfg.max_pages))  # the held pages' crops at once
        items = ((s.name, vlm.prompt(s.image, self.reader.mode), s) for _, _, s in jobs)
        done_at: dict[str, float] = {}
        read: dict[str, PageResult] = {}
        start = time.perf_counter()
        engine = Engine(vlm.adapter(), self.reader, cfg)
        for c in engine.run(items):
            read[c.name], done_at[c.name] = c, time.perf_counter()
        runtime.forward_passes += engine.forward_passes
        for r, t_layout in held:
            crops = [(at, read[s.name]) for p, at, s in jobs if p is r]
            splice(r, crops, self.tok)
            r.latency_s += max((done_at[c.name] for _, c in crops), default=start) - t_layout  # waiting for the chunk too
        return [r for r, _ in held]

    def regions(self, vlm, r: PageResult) -> list[tuple[int, Sample]]:
        """(index of the region's `<FORK>` in the layout stream, the region's crop) for each
        region of the decoded layout that holds content."""
        tok, image = self.tok, r.sample.image
        grid = model_grid(vlm, image)
        root = r.graph[0]
        out, head = [], []
        for i in range(root.prompt_len, len(root.tokens)):
            t = root.tokens[i]
            if t == tok.block_id:
                head = []
            elif t != tok.fork_id:
                head.append(t)
            else:
                block = parse_flat(BLOCK + tok.decode(head) + CHILD + EOS, image.width, image.height).page.blocks[0]
                if block.category not in UNREAD:
                    out.append((i, Sample(f"{r.name}#{len(out)}", region_truth(r.sample.page, block.bbox),
                                          stage1_crop(image, block.bbox, grid))))
        return out


def splice(r: PageResult, crops: list[tuple[int, PageResult]], tok: Tokenizer) -> None:
    """Each crop's reading into the page's graph as a branch of its region's `<FORK>` (a
    region left unread gets an empty one); steps: the layout's plus the longest crop's, the
    crops' steps appended to the timeline (each branch on its own row), their flags kept."""
    g, readings = r.graph, dict(crops)
    forks = [i for i in range(g[0].prompt_len, len(g[0].tokens)) if g[0].tokens[i] == tok.fork_id]
    rows: list[tuple[int, PageResult]] = []
    for k, at in enumerate(forks):
        child = g.fork(0, at=at, first=[tok.child_id], label=f"crop {k + 1}")
        c = readings.get(at)
        if c is not None:
            crop_root = c.graph[0]
            g.append(child.id, crop_root.tokens[crop_root.prompt_len:])
            rows.append((child.id, c))
            r.flags += [f"crop {k + 1}: {f}" for f in c.flags]
        g.finish(child.id)
    longest = max((c.steps for _, c in rows), default=0)
    r.timeline += [[sid for sid, c in rows if c.steps > j] for j in range(longest)]
    r.steps += longest


@STRATEGIES.register("crops")
def crops(tokenizer: Tokenizer, *, chunk: int | None = None) -> Strategy:
    """MinerU2.5 / PaddleOCR-VL's two-stage parse: the layout pass on the page, then every
    region read from its own crop, batched; `chunk`: pages whose crops are read together
    (null: the engine's pages in flight)."""
    return Strategy("crops", "tree", tokenizer, crops_target, after_decode=ReadCrops(tokenizer, chunk))
