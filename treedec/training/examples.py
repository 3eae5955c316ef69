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


def crop_examples(sample: Sample, vlm: VLM, rng: random.Random, k: int) -> list[Example]:
    """Up to `k` regions of the page, each cropped: prompt(crop) -> content <eos>."""
    tok = vlm.tokenizer
    blocks = [b for b in sample.page.blocks if b.category in CROP_CATEGORIES and b.content]
    out = []
    for b in rng.sample(blocks, min(k, len(blocks))):
        target = tok.encode(b.content) + [tok.eos_id]
        out.append(Example(flat_graph(vlm.prompt_ids("crop"), target), crop_image(sample.image, b.bbox)))
    return out
