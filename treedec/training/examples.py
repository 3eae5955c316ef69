"""Training examples from synthetic pages: a page as a strategy's ground-truth graph (flat
form for sequential SFT; one packed tree per page for PaDoc, every region supervised at one
image cost) and region crops (HSD stage 1: a crop -> that region's content)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image

from treedec.data.synth import Sample
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


def page_example(sample: Sample, vlm: VLM, strategy: Strategy) -> Example:
    """The whole page as the strategy's ground-truth graph (one packed tree per page)."""
    return Example(strategy.target(sample.page, vlm.tokenizer, vlm.prompt_ids(strategy.mode)), sample.image)


def crop_image(image: Image.Image, bbox, pad: int = 2) -> Image.Image:
    x1, y1, x2, y2 = bbox
    return image.crop((max(0, int(x1) - pad), max(0, int(y1) - pad), min(image.width, int(x2) + pad),
                       min(image.height, int(y2) + pad)))


def jitter_box(bbox, rng: random.Random, jitter: float):
    """`bbox` with each side moved by up to `jitter` of the box's height (in or out), never
    inverted: crops like a drafter's boxes, which sit tight on the ink or a little off."""
    x1, y1, x2, y2 = bbox
    d = jitter * (y2 - y1)
    x1, x2 = x1 + rng.uniform(-d, d), x2 + rng.uniform(-d, d)
    y1, y2 = y1 + rng.uniform(-d, d), y2 + rng.uniform(-d, d)
    return (min(x1, x2 - 1), min(y1, y2 - 1), max(x2, x1 + 1), max(y2, y1 + 1))


def crop_examples(sample: Sample, vlm: VLM, rng: random.Random, k: int, jitter: float = 0.0) -> list[Example]:
    """Up to `k` regions of the page, each cropped: prompt(crop) -> content <eos>. With
    `jitter` > 0 the crop box is moved by up to that share of its height per side
    (`jitter_box`), so that HSD's stage 1 reads crops of a drafter's boxes too."""
    tok = vlm.tokenizer
    blocks = [b for b in sample.page.blocks if b.category in CROP_CATEGORIES and b.content]
    out = []
    for b in rng.sample(blocks, min(k, len(blocks))):
        target = tok.encode(b.content) + [tok.eos_id]
        box = jitter_box(b.bbox, rng, jitter) if jitter > 0 else b.bbox
        out.append(Example(flat_graph(vlm.prompt_ids("crop"), target), crop_image(sample.image, box)))
    return out
