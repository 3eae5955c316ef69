"""PDF pages as images (pypdfium2: PDFium, the renderer of Chrome; no system packages).

A document that cannot be opened (encrypted, corrupt, not a PDF) raises `PdfError`
with the reason in words; a page that cannot be rendered does too, for that page only."""
from __future__ import annotations

from pathlib import Path

from PIL import Image


class PdfError(Exception):
    """A document or page PDFium could not read; the message says why."""


def _open(path: str | Path):
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        text = str(e)
        if "password" in text.lower():
            raise PdfError("encrypted PDF (needs a password): not decoded") from None
        why = text[text.find("PDFium:"):].strip(" ).") if "PDFium:" in text else text
        raise PdfError(f"not a readable PDF ({why})") from None


def page_count(path: str | Path) -> int:
    doc = _open(path)
    try:
        return len(doc)
    finally:
        doc.close()


class PdfReader:
    """One open document; `render(i, dpi, max_pixels)` gives page i (0-based) as RGB and
    the flags to show (e.g. a lowered DPI). Use as a context manager."""

    def __init__(self, path: str | Path):
        self.doc = _open(path)

    def __enter__(self) -> "PdfReader":
        return self

    def __exit__(self, *exc) -> None:
        self.doc.close()

    def render(self, index: int, dpi: float, max_pixels: int) -> tuple[Image.Image, list[str]]:
        import pypdfium2 as pdfium

        flags = []
        try:
            page = self.doc[index]
            try:
                w_pt, h_pt = page.get_size()
                scale = dpi / 72.0
                if w_pt * h_pt * scale * scale > max_pixels:  # a poster-size page: lower the DPI, do not refuse
                    scale = (max_pixels / (w_pt * h_pt)) ** 0.5
                    flags.append(f"rendered at {scale * 72:.0f} dpi instead of {dpi:g}: at {dpi:g} dpi the page is over "
                                 f"data.max_pixels={max_pixels}")
                bitmap = page.render(scale=scale, fill_color=(255, 255, 255, 255))
                image = bitmap.to_pil().convert("RGB")
                bitmap.close()
            finally:
                page.close()
        except pdfium.PdfiumError as e:
            raise PdfError(f"PDF page {index + 1} cannot be rendered ({e})") from None
        return image, flags
