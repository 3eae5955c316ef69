"""The forced decoder as a server (`serve model=forced data=omnidocbench ...`): a request's image
is found again among the data set's pages, or among the crops of their regions, however the
client resized it, and the request is answered with that page's or region's ground truth as the
model's format writes it (its tokens forced: `treedec.engine.forced`).

- A page (a page or layout prompt): the page whose thumbnail (the image squashed to 32 x 32,
  grey) is nearest, whatever the client's resize did to its sides (MinerU squashes a page to
  1036 x 1036).
- A crop (a crop prompt): the region whose crop is nearest. A region's crops are cut at its
  ground-truth box and at the box the format's layout pass writes for it (what a client that
  read that layout cuts: MinerU's boxes on the 0-1000 grid). A request is compared with a crop
  of the same aspect at the crop's own size, shrunk to at most 96 px on its longer side (a
  client that enlarged a small crop, as MinerU does to 28 px, adds nothing a shrink does not take
  back); where the aspects differ (a client padded a thin crop: MinerU to an aspect of 50), both
  are trimmed of their white margins first.

An image nearer to no page or region than `MAX_DISTANCE` (mean absolute grey difference, 0-255)
matches none: a 400 saying so."""
from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

from treedec.data.sample import Sample
from treedec.formats import Format
from treedec.page import Block, Page
from treedec.serve.errors import bad
from treedec.strategies.crop_read import UNREAD

PAGE_THUMB = 32
CROP_SIDE = 96
MAX_DISTANCE = 16.0  # a page or crop resized back and forth stays well under it; another page's is far over
ASPECT_TOLERANCE = 0.15  # log-ratio: crops whose aspects differ more are not compared as they are
INK = 235  # grey below this is ink (trimming white margins)
BLUR = 1.0  # px: both blurred alike before comparing (a client's resampling moves edges by a pixel)


def _grey(image: Image.Image) -> Image.Image:
    return image.convert("L")


def page_thumb(image: Image.Image) -> np.ndarray:
    return np.asarray(_grey(image).resize((PAGE_THUMB, PAGE_THUMB), Image.Resampling.BOX), dtype=np.float32)


def trimmed(image: Image.Image) -> Image.Image:
    """The (grey) image without its white margins (the whole image where it has no ink)."""
    grey = _grey(image)
    box = Image.eval(grey, lambda v: 255 if v < INK else 0).getbbox()
    return grey.crop(box) if box else grey


def aspect(image: Image.Image) -> float:
    return image.width / image.height


def compared(image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """The grey image as it is compared at `size`: shrunk (area-averaged), then blurred."""
    return np.asarray(image.resize(size, Image.Resampling.BOX).filter(ImageFilter.GaussianBlur(BLUR)), dtype=np.float32)


def compare_size(crop: Image.Image) -> tuple[int, int]:
    """A crop's own size, shrunk to at most `CROP_SIDE` px on its longer side."""
    f = min(1.0, CROP_SIDE / max(crop.size))
    return max(1, round(crop.width * f)), max(1, round(crop.height * f))


class Crop:
    """A region's crop, as requests are compared with it: as it is, and trimmed of its margins
    (mean absolute grey difference at the crop's size shrunk to `CROP_SIDE`, both blurred alike)."""

    def __init__(self, sample: Sample, block: Block, image: Image.Image):
        self.sample, self.block = sample, block
        self.forms = []  # (aspect, compare size, the crop compared there): as it is, trimmed
        for form in (image, trimmed(image)):
            size = compare_size(form)
            self.forms.append((aspect(form), size, compared(form, size)))

    def distance(self, request: Image.Image, inked: Image.Image) -> float | None:
        """The request's distance to this crop (None: aspects too far apart to compare)."""
        for req, (a, size, grid) in zip((request, inked), self.forms):
            if abs(np.log(aspect(req) / a)) <= ASPECT_TOLERANCE:
                return float(np.abs(compared(req, size) - grid).mean())
        return None


class DataPages:
    """A data set's pages (samples with their ground truth and image), found from an image;
    `fmt`: the format whose layout pass told a client where the regions are."""

    def __init__(self, samples, fmt: Format | None = None):
        self.pages: list[tuple[Sample, np.ndarray]] = []
        self.crops: list[Crop] = []
        for s in samples:
            if s.image is None or s.page is None:
                continue
            self.pages.append((s, page_thumb(s.image)))
            for block, boxes in region_boxes(s.page, fmt):
                for box in boxes:
                    crop = cut(s, box)
                    if crop is not None:
                        self.crops.append(Crop(s, block, _grey(crop)))
        if not self.pages:
            raise ValueError("the data set has no page with an image and a ground truth")

    def page(self, image: Image.Image, where: str) -> Sample:
        thumb = page_thumb(image)
        dist, sample = min((float(np.abs(thumb - t).mean()), s) for s, t in self.pages)
        if dist > MAX_DISTANCE:
            raise bad(where, f"the image matches no page of the data set (nearest: {sample.name!r} at {dist:.1f} > "
                             f"{MAX_DISTANCE}): the forced decoder answers about its data set's pages only")
        return sample

    def region(self, image: Image.Image, where: str) -> tuple[Sample, Block]:
        grey = _grey(image)
        inked = trimmed(grey)
        best = None
        for c in self.crops:
            d = c.distance(grey, inked)
            if d is not None and (best is None or d < best[0]):
                best = (d, c)
        if best is None or best[0] > MAX_DISTANCE:
            near = f" (nearest at {best[0]:.1f} > {MAX_DISTANCE})" if best else ""
            raise bad(where, f"the image matches no region of the data set's pages{near}: the forced decoder answers "
                             "about its data set's pages and their regions' crops only")
        return best[1].sample, best[1].block


def region_boxes(page: Page, fmt: Format | None) -> list[tuple[Block, list]]:
    """Each region a crop is read of, and the boxes a client may cut it at: its own, and the one the
    format's layout pass writes for it (read back into the page's pixels), where it has one."""
    blocks = page.reading_order()
    written = [None] * len(blocks)
    if fmt is not None and fmt.layout_mode == "layout":
        read = fmt.read_layout(fmt.render_layout(page), page.width, page.height).page.blocks
        if len(read) == len(blocks):
            written = [b.bbox for b in read]
    out = []
    for b, w in zip(blocks, written):
        if b.category not in UNREAD:  # a region without text too: it is read as empty
            out.append((b, [b.bbox] + ([w] if w is not None and tuple(w) != tuple(b.bbox) else [])))
    return out


def cut(sample: Sample, bbox) -> Image.Image | None:
    """The crop of the page image at `bbox` (the page's pixels; clipped to the page), as a client
    cuts it (PIL's crop, the box's corners rounded)."""
    w, h = sample.pixel_size()
    sx, sy = sample.image.width / w, sample.image.height / h
    x1, y1, x2, y2 = bbox
    box = (max(0, round(x1 * sx)), max(0, round(y1 * sy)), min(sample.image.width, round(x2 * sx)),
           min(sample.image.height, round(y2 * sy)))
    if box[2] - box[0] < 1 or box[3] - box[1] < 1:
        return None
    return sample.image.crop(box)


def region_page(sample: Sample, block: Block) -> Page:
    """The ground truth of a region's crop: the block alone on its page (what `crop_target` reads)."""
    return Page(sample.page.width, sample.page.height, [block])
