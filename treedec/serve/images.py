"""A request's image: a data URL (`data:image/png;base64,...`; PNG, JPEG, WebP, anything PIL
reads) decoded into an RGB page, a transparent one composited on white (as vLLM converts RGBA).
The server fetches nothing: an http(s) or file URL is a 400. An image over `max_pixels` is a
413 naming the limit, checked from its header before its pixels are decoded."""
from __future__ import annotations

import base64
import binascii
import io
import warnings

from PIL import Image

from treedec.serve.errors import ApiError, bad

MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485  # PIL's decompression-bomb limit (89.5 M pixels)


def read_image(url: str, where: str, max_pixels: int = MAX_PIXELS) -> Image.Image:
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0] if ":" in url[:12] else "a path"
        raise bad(where, f"the image must be a data URL (data:image/...;base64,...), not {scheme}: the server "
                         "fetches nothing")
    head, sep, payload = url.partition(",")
    if not sep or ";base64" not in head:
        raise bad(where, "the data URL must be base64 (data:image/png;base64,...)")
    try:
        data = base64.b64decode(payload.strip(), validate=True)
    except (binascii.Error, ValueError) as e:
        raise bad(where, f"bad base64 in the data URL ({e})") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            w, h = image.size
            if w * h > max_pixels:
                raise ApiError(413, f"{where}: the image is {w}x{h} = {w * h} pixels, over the server's limit of "
                                    f"{max_pixels} (serve.max_image_pixels)", where)
            image.load()
    except ApiError:
        raise
    except Image.DecompressionBombError as e:
        raise ApiError(413, f"{where}: {e}", where) from None
    except Exception as e:  # PIL's errors for bytes that are no image it reads (UnidentifiedImageError, OSError, ...)
        raise bad(where, f"the bytes are no image PIL reads ({type(e).__name__}: {str(e)[:120]})") from None
    if w < 1 or h < 1:
        raise bad(where, f"the image is {w}x{h} pixels")
    return rgb(image)


def rgb(image: Image.Image) -> Image.Image:
    """The image as RGB, transparency composited on white."""
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        image = image.convert("RGBA")
        page = Image.new("RGB", image.size, (255, 255, 255))
        page.paste(image, mask=image.getchannel("A"))
        return page
    return image.convert("RGB")
