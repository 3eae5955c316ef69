"""HSD's stage 1: every draft region of a page that holds content is cut from the page
(`stage1_crop`: on the model's patch grid where it has one) and read by the target model
(prompt mode `crop`; on a checkpoint without a crop prompt, its page prompt `flat`: the crop
read as a small page, its blocks' content the region's reading, `stage1_mode`) with the
region's draft as speculation, written as the run's format writes a crop read or a page.
`CropReads` is one run's stage 1 (`treedec.strategies.stages.Stage1`):
the strategy that reads the crops and the crops of each drafted page; `treedec.run.stages` runs it."""
from __future__ import annotations

from treedec.data.sample import Sample
from treedec.drafters.ngram import NgramMatcher
from treedec.drafters.page_drafts import SequenceDrafter
from treedec.engine.draft_length import AdaptiveLength
from treedec.page import Block, Page
from treedec.formats import Format, get_format
from treedec.formats.contract import EOS
from treedec.strategies.base import Strategy
from treedec.strategies.crop_read import crop_target, region_truth
from treedec.strategies.sequential import flat_target
from treedec.strategies.stages import Drafted
from treedec.tokenizer import Tokenizer
from treedec.training.examples import CROP_CATEGORIES, crop_image, snap_box


class CropReads:
    def __init__(self, tok: Tokenizer, matcher: NgramMatcher, vlm, adaptive: bool, fmt: Format | None = None):
        self.tok, self.mode, self.fmt = tok, stage1_mode(vlm), fmt or get_format("treedec")
        drafts = SequenceDrafter(matcher)
        self.strategy = Strategy("hsd_stage1", self.mode, tok, crop_target if self.mode == "crop" else flat_target,
                                 drafter=AdaptiveLength(drafts, matcher.max_depth) if adaptive else drafts,
                                 format=self.fmt)

    def crops(self, vlm, d: Drafted) -> list[tuple[Sample, list[list[int]]]]:
        """The crops of a drafted page's regions that hold content (`crop_blocks`), in reading
        order, each with its drafts: its region's draft as a token sequence, written as the
        format's crop read (`Format.crop_text`) or page (`page_draft`) writes it."""
        s = d.sample
        if d.page is None or s.image is None:
            return []
        out = []
        for k, b in crop_blocks(d.page, numbered=True):
            crop = Sample(f"{s.name}#{k}", region_truth(s.page, b.bbox), stage1_crop(s.image, b.bbox, d.grid),
                          category=b.category)
            out.append((crop, [crop_draft(self.tok, self.fmt, b, self.mode)]))
        return out


def crop_draft(tok: Tokenizer, fmt: Format, block, mode: str) -> list[int]:
    """A draft block as the token ids of its crop's read in prompt mode `mode`: the format's
    crop read (`Format.crop_text`), or, read with the page prompt, the format's page holding it
    alone (`page_draft`); then the end token."""
    return tok.encode(fmt.crop_text(block) if mode == "crop" else page_draft(block, fmt)) + [tok.eos_id]


def crop_blocks(page: Page, numbered: bool = False) -> list:
    """The blocks of a draft page that stage 1 reads (content in a crop category), in reading
    order; with `numbered`, as (index in reading order, block)."""
    blocks = [(k, b) for k, b in enumerate(page.reading_order()) if b.category in CROP_CATEGORIES and b.content]
    return blocks if numbered else [b for _, b in blocks]


def stage1_mode(vlm) -> str:
    """The prompt stage 1 reads a crop with: `crop`, or, on a checkpoint trained without crops
    (HSD is training-free), its page prompt `flat`: the crop read as a small page."""
    return "crop" if vlm.has_prompt("crop") else "flat"


def page_draft(block, fmt: Format | None = None) -> str:
    """A draft block as `fmt` (None: treedec's flat form) writes a page holding it alone (what a
    crop read with the page prompt is drafted by), its box drafted as the whole crop; its end
    token left to the caller."""
    fmt = fmt or get_format("treedec")
    text = fmt.render(Page(1, 1, [Block(block.category, (0.0, 0.0, 1.0, 1.0), block.content)]))
    return text.removesuffix(fmt.eos_text) if fmt.eos_text else text


def crop_reading(rec, mode: str) -> str:
    """A crop's reading from its record: in crop mode its text (its end token dropped); read
    with the page prompt, the content of the page's blocks in reading order."""
    if mode == "crop":
        return rec.text[: -len(EOS)] if rec.text.endswith(EOS) else rec.text
    return "\n".join(b.content for b in rec.page.reading_order() if b.content)


def model_grid(vlm, image) -> int | None:
    """The model's patch grid in `image`'s pixels (`VLM.page_grid`); None for a model
    without one (Qwen3-VL resizes its images) or a page it shrinks."""
    return vlm.page_grid(image)


def stage1_crop(image, bbox, grid: int | None):
    """A drafted region's crop as stage 1 decodes it: with the model's `grid`, the box moved to
    the nearest grid lines and cut as the crop task was trained on; else box + 2 px."""
    return crop_image(image, snap_box(bbox, grid) if grid else bbox, grid=grid)
