"""Drawing primitives on a glyph grid: monospace text, table grids, formulas, figures."""
from __future__ import annotations

import io
import random
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont


@lru_cache(maxsize=8)
def font(cell_w: int, cell_h: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    from matplotlib import font_manager

    path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans Mono",
                                                             weight="bold" if bold else "normal"))
    size = max(6, int(min(cell_w / 0.61, cell_h * 0.82)))
    return ImageFont.truetype(path, size)


def draw_text_line(draw: ImageDraw.ImageDraw, x: int, y: int, text: str, cell: tuple[int, int], bold: bool = False) -> None:
    """One character per grid cell starting at pixel (x, y): glyphs stay on the grid."""
    cw, ch = cell
    f = font(cw, ch, bold)
    top = (ch - sum(f.getmetrics())) // 2
    for i, c in enumerate(text):
        if c != " ":
            draw.text((x + i * cw, y + top), c, fill=0, font=f)


@lru_cache(maxsize=4096)
def _formula_png(latex: str, dpi: int) -> bytes:
    from matplotlib.mathtext import math_to_image

    buf = io.BytesIO()
    math_to_image(f"${latex}$", buf, dpi=dpi, format="png")
    return buf.getvalue()


def formula_image(latex: str, height: int) -> Image.Image:
    """The formula rendered by matplotlib mathtext, scaled to `height` pixels."""
    img = Image.open(io.BytesIO(_formula_png(latex, 100))).convert("L")
    w = max(1, round(img.width * height / img.height))
    return img.resize((w, height), Image.Resampling.LANCZOS)


def draw_figure(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], rng: random.Random) -> None:
    """A plot-like picture: a frame with bars or dots."""
    x1, y1, x2, y2 = box
    draw.rectangle(box, outline=0, width=1)
    n = rng.randint(3, 8)
    if rng.random() < 0.5:
        bw = (x2 - x1 - 4) / n
        for i in range(n):
            h = rng.uniform(0.2, 0.9) * (y2 - y1 - 4)
            draw.rectangle((x1 + 2 + i * bw + 1, y2 - 2 - h, x1 + 2 + (i + 1) * bw - 1, y2 - 2), fill=rng.randint(60, 180))
    else:
        for _ in range(n * 3):
            cx, cy = rng.uniform(x1 + 4, x2 - 4), rng.uniform(y1 + 4, y2 - 4)
            draw.ellipse((cx - 2, cy - 2, cx + 2, cy + 2), fill=rng.randint(0, 150))
