"""Synthetic reading pages: random character strings in glyph cells aligned with the ViT patch grid.

A page is a square image of G x G cells (cell = `cell` px, one glyph per cell, DejaVu Sans
Mono from matplotlib, black on white). Regions are rectangles of cells; a region's content
is one random string wrapped at the region width (no newline tokens: text-block content is
a continuous string, as in OmniDocBench). Target = the flat serialization
`<BLOCK><|text_block|>[x1,y1,x2,y2]<CHILD>content ... <eos>` (boxes 0-1000).
"""
from __future__ import annotations

import random
import string
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CHARSET = string.ascii_letters + string.digits + "!#$%&()*+-/:;<=>?@[]^{}~"  # 86, no space/quotes


@lru_cache(maxsize=4)
def _glyphs(cell: int, size: int) -> dict[str, np.ndarray]:
    import matplotlib.font_manager as fm

    font = ImageFont.truetype(fm.findfont("DejaVu Sans Mono"), size)
    out = {}
    for ch in CHARSET:
        im = Image.new("L", (cell, cell), 255)
        d = ImageDraw.Draw(im)
        w = font.getlength(ch)
        d.text(((cell - w) / 2, (cell - size - 4) / 2 + 1), ch, font=font, fill=0)
        out[ch] = np.asarray(im)
    return out


@dataclass
class Region:
    cx: int  # cell column of the top-left corner
    cy: int
    w: int  # width in cells
    text: str

    @property
    def h(self) -> int:
        return -(-len(self.text) // self.w)


def sample_page(rng: random.Random, grid: int, level: int) -> list[Region]:
    """level -1: one line at the top-left cell (constant text->image offset); 0: one line
    at column 0 of a random row; 1: one line anywhere; 2: one multi-line region;
    3: 1-3 multi-line regions at different places (non-overlapping rows)."""
    if level == -1:
        return [Region(0, 0, grid, "".join(rng.choices(CHARSET, k=rng.randint(3, grid))))]
    if level == 0:
        n = rng.randint(3, grid)
        return [Region(0, rng.randrange(grid), grid, "".join(rng.choices(CHARSET, k=n)))]
    if level == 1:
        cx = rng.randrange(grid - 2)
        w = rng.randint(3, grid - cx)
        return [Region(cx, rng.randrange(grid), w, "".join(rng.choices(CHARSET, k=rng.randint(2, w))))]
    if level == 2:
        cx = rng.randrange(grid - 3)
        w = rng.randint(4, grid - cx)
        h = rng.randint(2, min(5, grid))
        cy = rng.randrange(grid - h + 1)
        n = rng.randint(w * (h - 1) + 1, w * h)
        return [Region(cx, cy, w, "".join(rng.choices(CHARSET, k=n)))]
    # level 3: stack 1-3 regions top to bottom with random x/width
    k = rng.randint(1, 3)
    regions, y = [], 0
    for i in range(k):
        left = grid - y
        if left < 2:
            break
        h = rng.randint(1, min(4, max(1, left // (k - i) - 1)))
        y += rng.randint(0, max(0, left // (k - i) - h - 1))
        cx = rng.randrange(grid - 3)
        w = rng.randint(4, grid - cx)
        n = rng.randint(w * (h - 1) + 1, w * h)
        regions.append(Region(cx, y, w, "".join(rng.choices(CHARSET, k=n))))
        y += h + 1
    return regions


def render(regions: list[Region], grid: int, cell: int, font_size: int) -> np.ndarray:
    g = _glyphs(cell, font_size)
    img = np.full((grid * cell, grid * cell), 255, np.uint8)
    for r in regions:
        for i, ch in enumerate(r.text):
            y, x = r.cy + i // r.w, r.cx + i % r.w
            img[y * cell:(y + 1) * cell, x * cell:(x + 1) * cell] = g[ch]
    return img


def box_text(r: Region, grid: int) -> str:
    q = lambda v: round(1000 * v / grid)  # noqa: E731
    return f"[{q(r.cx)},{q(r.cy)},{q(r.cx + min(r.w, len(r.text)))},{q(r.cy + r.h)}]"


def target_segments(regions: list[Region], grid: int) -> list[tuple[str, str]]:
    """[(layout prefix incl. <CHILD>, content)] per region in reading order."""
    return [(f"<BLOCK><|text_block|>{box_text(r, grid)}<CHILD>", r.text) for r in regions]
