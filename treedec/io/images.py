"""Open a page image the way users' files come: any mode, any size, broken or not.

`load_image` never raises for a bad file: it returns the RGB image (or None) and the
reasons a user should see (flags). Memory is bounded by `max_pixels` (checked from the
header, before decoding: PIL's own decompression-bomb limit is replaced by it) and
pages larger than `max_side` are downscaled (the model sees a small canvas anyway)."""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

TINY_SIDE = 16  # a page image with a side below this many pixels is flagged (still decoded)


@dataclass
class Loaded:
    image: Image.Image | None  # RGB, at most max_side on its longer side; None: not decoded
    size: tuple[int, int] | None = None  # the page's own pixel size (before any downscale)
    flags: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _no_bomb_check():
    """Our `max_pixels` decides, not PIL's global MAX_IMAGE_PIXELS (its error would name
    a limit the user cannot set)."""
    old = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            yield
    finally:
        Image.MAX_IMAGE_PIXELS = old


def megapixels(w: int, h: int) -> str:
    return f"{w * h / 1e6:.1f} Mpx"


def load_image(src: str | Path | IO[bytes], max_pixels: int, max_side: int) -> Loaded:
    """Open, check, decode and normalize one image file (or file object)."""
    if isinstance(src, (str, Path)) and Path(src).stat().st_size == 0:
        return Loaded(None, flags=["unreadable: empty file (0 bytes)"])
    try:
        with _no_bomb_check():
            im = Image.open(src)
            w, h = im.size
            flags = []
            if w * h > max_pixels:
                fw, fh = _fit(w, h, max_pixels, max_side)
                # JPEG decodes at 1/2, 1/4, 1/8 scale, the smallest at least the size asked: ask half the fitting
                # size to get one that fits; other formats ignore this
                im.draft("RGB", (max(1, fw // 2), max(1, fh // 2)))
                if im.size[0] * im.size[1] > max_pixels:
                    return Loaded(None, (w, h), [f"unreadable: {w}x{h} px ({megapixels(w, h)}) is over data.max_pixels="
                                                 f"{max_pixels} ({megapixels(max_pixels, 1)}); not decoded, to protect "
                                                 "memory (raise data.max_pixels to read it)"])
                flags.append(f"decoded at reduced scale {im.size[0]}x{im.size[1]}: {w}x{h} px is over data.max_pixels")
            frames = getattr(im, "n_frames", 1)
            im.load()
    except UnidentifiedImageError:
        return Loaded(None, flags=["unreadable: not an image (no known image format)"])
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        return Loaded(None, flags=[f"unreadable: truncated or corrupt image data ({_short(e)})"])
    if frames > 1:  # the file stays open for the other frames: keep the first, close it
        flags.append(f"image has {frames} frames: only the first is read")
        first = im.copy()
        im.close()
        im = first
    try:
        im, more = _to_rgb(im)
    except (OSError, ValueError) as e:
        return Loaded(None, (w, h), [f"unreadable: cannot convert mode {im.mode} to RGB ({_short(e)})"])
    flags += more
    if min(w, h) < TINY_SIDE:
        flags.append(f"tiny image ({w}x{h} px): probably not a page")
    if max(im.size) > max_side:
        before = im.size
        im = downscale(im, max_side)
        flags.append(f"downscaled from {before[0]}x{before[1]} to {im.size[0]}x{im.size[1]} px (data.max_side="
                     f"{max_side}); the model reads a smaller canvas anyway, boxes stay in the page's own pixels")
    return Loaded(im, (w, h), flags)


def downscale(im: Image.Image, max_side: int) -> Image.Image:
    f = max_side / max(im.size)
    size = (max(1, round(im.width * f)), max(1, round(im.height * f)))
    factor = int(1 / f)
    if factor >= 2:  # integer box reduction first: fast and anti-aliased
        im = im.reduce(factor)
    return im.resize(size, Image.Resampling.LANCZOS) if im.size != size else im


def _fit(w: int, h: int, max_pixels: int, max_side: int) -> tuple[int, int]:
    f = min((max_pixels / (w * h)) ** 0.5, max_side / max(w, h), 1.0)
    return max(1, int(w * f)), max(1, int(h * f))


def _to_rgb(im: Image.Image) -> tuple[Image.Image, list[str]]:
    """RGB 8-bit, with what was done said: EXIF rotation, 16-bit scaled (not clipped),
    CMYK converted, transparency composited on white (not black)."""
    flags = []
    rotated = ImageOps.exif_transpose(im)
    if rotated is not None and rotated is not im:
        if im.getexif().get(0x0112, 1) != 1:
            flags.append("rotated as its EXIF orientation says")
        im = rotated
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        arr = np.asarray(im)
        if mode == "F":  # floats: stretch their range
            lo, hi = float(arr.min(initial=0)), float(arr.max(initial=1))
            grey = ((arr - lo) * (255.0 / ((hi - lo) or 1.0))).astype(np.uint8)
        elif mode == "I" and arr.max(initial=0) <= 255:
            grey = arr.astype(np.uint8)
        else:  # 16 bits (or 32-bit ints holding them): keep the top 8 bits, never clip to white
            grey = np.clip(arr >> 8, 0, 255).astype(np.uint8)
        im = Image.fromarray(grey)
        flags.append(f"{'float' if mode == 'F' else '16-bit'} grey image scaled to 8 bits")
    if mode == "CMYK":
        flags.append("CMYK image converted to RGB")
    if mode in ("RGBA", "LA", "PA") or (mode in ("P", "RGB", "L") and "transparency" in im.info):
        rgba = im.convert("RGBA")
        if rgba.getchannel("A").getextrema()[0] < 255:
            flags.append("transparent areas composited on white")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB"), flags
    return (im if im.mode == "RGB" else im.convert("RGB")), flags


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:160]
