"""Training examples for a Qwen3-VL checkpoint: a page (synthetic, or an OmniDocBench-format
annotation with its image) as a strategy's ground-truth graph rooted at the prompt the
inference side builds (`Qwen3VL.prompt`: the checkpoint's chat template, the image, the
strategy's mode token), so training and decoding see the same tokens and positions."""
from __future__ import annotations

from pathlib import Path

from PIL import Image

from treedec.errors import UserError
from treedec.models.qwen3_vl import Qwen3VL
from treedec.page import Page
from treedec.strategies.base import Strategy
from treedec.training.qwen3_vl_packing import VLExample


def page_example(vlm: Qwen3VL, page: Page, image: Image.Image, strategy: Strategy) -> VLExample:
    prompt = vlm.prompt(image, strategy.mode)
    return VLExample(strategy.truth(page, prompt.ids), prompt)


def synthetic_pages(seeds, page_cfg) -> list:
    """Synthetic `Sample`s (name, page, image) of the given seeds."""
    from treedec.data.synth import generate_page

    return [generate_page(seed, page_cfg) for seed in seeds]


def omnidocbench_pages(root: str | Path, json: str | None = None, limit: int | None = None) -> list:
    """The `Sample`s of an OmniDocBench-format folder (`treedec.data.OmniDocBenchDataset`:
    one JSON, images in `images/`); a page whose image cannot be read is a user error (a
    training set never drops a page silently)."""
    from treedec.data import OmniDocBenchDataset

    samples = list(OmniDocBenchDataset(str(root), json=json, limit=limit))
    missing = [s.name for s in samples if s.image is None]
    if missing:
        raise UserError(f"{len(missing)} page image(s) of {root} cannot be read (first: {missing[0]}); "
                        "fix or remove them from the annotations")
    return samples
