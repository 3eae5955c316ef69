"""One page to decode, whatever it came from: a generated page, a page of an annotated data
set, an image or PDF page read from a file, a crop of another page."""
from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image

from treedec.page import Page


@dataclass
class Sample:
    """`name`: the page's name (an image stem); `page`: its ground truth (None: none);
    `image`: the page as the model sees it (None: not rendered, or unreadable); `size`: the
    page's own pixel size where it differs from the image's (the predicted boxes are in these
    pixels even when the image was downscaled; None: the image's); `flags`: what reading it
    found (unreadable, downscaled, converted ...); `category`: a crop's region category (its crop
prompt, where the format has one per category; None: a page)."""
    name: str
    page: Page | None
    image: Image.Image | None
    size: tuple[int, int] | None = None
    flags: list[str] = field(default_factory=list)
    category: str | None = None

    def pixel_size(self) -> tuple[int, int] | None:
        """The page's own pixel size: `size` where given, else its image's (None without either)."""
        if self.size:
            return self.size
        return self.image.size if self.image is not None else None
