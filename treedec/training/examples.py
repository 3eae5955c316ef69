"""Training examples from synthetic pages: a page as a strategy's ground-truth graph (flat
form for sequential SFT; one packed tree per page for PaDoc, every region supervised at one
image cost) and region crops (HSD stage 1: a crop -> that region's content)."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from PIL import Image

from treedec.data.sample import Sample
from treedec.data.synth.content import formula
from treedec.formats.contract import category_token
from treedec.graph import DecodingGraph
from treedec.models.vlm import VLM
from treedec.strategies.base import Strategy
from treedec.training.packing import flat_graph

CROP_CATEGORIES = frozenset({"title", "text_block", "table", "table_caption", "figure_caption", "header", "footer",
                             "page_number", "equation_isolated"})


@dataclass
class Example:
    graph: DecodingGraph
    image: Image.Image
    # (stream, token index) pairs that are inputs only: no label predicts them (and no grounding target)
    no_loss: frozenset[tuple[int, int]] = frozenset()


def page_example(sample: Sample, vlm: VLM, strategy: Strategy) -> Example:
    """The whole page as the strategy's ground-truth graph (one packed tree per page)."""
    return Example(strategy.truth(sample.page, vlm.prompt_ids(strategy.mode)), sample.image)


def _misread_content(content: list[int], category: str, tok, rng: random.Random) -> list[int]:
    """What a wrong read of a region looks like: another formula for a formula (the tiny
    model's misreads are fluent formulas of the wrong symbols), else the same tokens with
    about a third of them swapped for others of the region and the length moved by a few."""
    if category == "equation_isolated":
        return tok.encode(formula(rng))
    out = [rng.choice(content) if rng.random() < 0.33 else t for t in content]
    cut = rng.randint(-3, 3)
    return out[:cut] if cut < 0 else out + [rng.choice(content) for _ in range(cut)]


def misread(example: Example, tok, rng: random.Random, prob: float, categories) -> Example:
    """Training against exposure bias in the flat form, where one badly read region used to
    derail the rest of the page (a sequential parser reads every later block after its own
    misread formula). Each region of `categories` is, with probability `prob`, given wrong
    content (`_misread_content`) that is input only (`no_loss`); the tokens after it (the
    next block's layout, or `<eos>`) keep their labels, so the model learns to go on with
    the page after a misread. Examples of more than one stream (trees: a branch's misread
    never reaches the layout) are returned unchanged."""
    g = example.graph
    if prob <= 0 or len(g) != 1:
        return example
    cat_of = {tok.vocab[category_token(c)]: c for c in categories}
    tokens, s = [], g[0]
    no_loss = set()
    i, n = 0, len(s.tokens)
    category = None
    while i < n:
        t = s.tokens[i]
        if t == tok.block_id and i + 1 < n:
            category = cat_of.get(s.tokens[i + 1])
        tokens.append(t)
        i += 1
        if t == tok.child_id and i >= s.prompt_len and category is not None:
            end = i
            while end < n and s.tokens[end] not in (tok.block_id, tok.eos_id):
                end += 1
            content = s.tokens[i:end]
            if content and rng.random() < prob:
                wrong = _misread_content(content, category, tok, rng)
                no_loss.update(range(len(tokens), len(tokens) + len(wrong)))
                tokens += wrong
                i = end
    if not no_loss:
        return example
    return replace(example, graph=flat_graph(tokens[:s.prompt_len], tokens[s.prompt_len:]),
                   no_loss=frozenset((0, j) for j in no_loss))


def crop_image(image: Image.Image, bbox, pad: int = 2, grid: int | None = None) -> Image.Image:
    """The region `bbox` of `image`, `pad` pixels wider per side (white beyond the page's
    edge, so a box at the edge keeps the same geometry). With `grid` (the model's patch
    pitch in page pixels) the box is first snapped outward to that grid: a drafter's box,
    tight on the ink, then gives the crop the crop task was trained on (cell-aligned box +
    `pad`; the tiny model reads glyphs only at the pixel offset it was trained on)."""
    x1, y1, x2, y2 = bbox
    if grid:
        x1, y1 = math.floor(x1 / grid) * grid, math.floor(y1 / grid) * grid
        x2, y2 = math.ceil(x2 / grid) * grid, math.ceil(y2 / grid) * grid
    box = (int(x1) - pad, int(y1) - pad, int(x2) + pad, int(y2) + pad)
    inside = (max(0, box[0]), max(0, box[1]), min(image.width, box[2]), min(image.height, box[3]))
    if inside == box:
        return image.crop(box)
    out = Image.new(image.mode, (box[2] - box[0], box[3] - box[1]), "white")
    if inside[0] < inside[2] and inside[1] < inside[3]:
        out.paste(image.crop(inside), (inside[0] - box[0], inside[1] - box[1]))
    return out


def snap_box(bbox, grid: int):
    """`bbox` with each side moved to the nearest line of the `grid` (at least one cell
    wide and high): a drafter's box, tight on the ink or a few pixels loose, becomes the
    box of the glyph cells it covers, the box the crop task was trained on."""
    x1, y1, x2, y2 = (round(v / grid) * grid for v in bbox)
    return (x1, y1, max(x2, x1 + grid), max(y2, y1 + grid))


def jitter_box(bbox, rng: random.Random, jitter: float, unit: float | None = None):
    """`bbox` with each side moved by up to `jitter` x `unit` (in or out; `unit` defaults to
    the box's height, one glyph cell is the natural choice), never inverted: crops like a
    drafter's boxes, which sit tight on the ink or a little off."""
    x1, y1, x2, y2 = bbox
    d = jitter * (unit if unit else y2 - y1)
    x1, x2 = x1 + rng.uniform(-d, d), x2 + rng.uniform(-d, d)
    y1, y2 = y1 + rng.uniform(-d, d), y2 + rng.uniform(-d, d)
    return (min(x1, x2 - 1), min(y1, y2 - 1), max(x2, x1 + 1), max(y2, y1 + 1))


def crop_examples(sample: Sample, vlm: VLM, rng: random.Random, k: int, jitter: float = 0.0) -> list[Example]:
    """Up to `k` regions of the page, each cropped: prompt(crop) -> content <eos>, cut as
    HSD's stage 1 cuts them (`crop_image` on the model's `page_grid`). With `jitter` > 0
    each side of the box first moves by up to that share of a grid cell (of the box's
    height without a grid), so after snapping a crop may hold an extra row or column of
    context, as a drafter's looser boxes give."""
    tok = vlm.tokenizer
    grid = vlm.page_grid(sample.image)
    blocks = [b for b in sample.page.blocks if b.category in CROP_CATEGORIES and b.content]
    out = []
    for b in rng.sample(blocks, min(k, len(blocks))):
        target = tok.encode(b.content) + [tok.eos_id]
        box = jitter_box(b.bbox, rng, jitter, grid) if jitter > 0 else b.bbox
        out.append(Example(flat_graph(vlm.prompt_ids("crop"), target), crop_image(sample.image, box, grid=grid)))
    return out
