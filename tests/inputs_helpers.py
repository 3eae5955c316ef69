"""Input files of every kind, made by the tests themselves: good pages, PDFs, bad files."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image


def pdf_bytes(colors=("white", "red", "blue"), size=(612, 792)) -> bytes:
    """A PDF with one page per colour (PIL writes it: 72 dpi, so `size` is in points)."""
    buf = io.BytesIO()
    pages = [Image.new("RGB", size, c) for c in colors]
    pages[0].save(buf, "PDF", save_all=True, append_images=pages[1:])
    return buf.getvalue()


def encrypted_pdf_bytes() -> bytes:
    """A one-page PDF under the standard security handler whose user password is not empty."""
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
            "<< /Filter /Standard /V 1 /R 2 /O <" + "ab" * 32 + "> /U <" + "cd" * 32 + "> /P -4 >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj {o} endobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (f"trailer << /Size {len(objs) + 1} /Root 1 0 R /Encrypt 4 0 R /ID [<{'00' * 16}> <{'00' * 16}>] >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode()
    return out


def png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def bad_inputs(folder: Path) -> dict[str, str]:
    """Write one file of every bad kind into `folder`; returns page name -> a word its flag must contain."""
    folder.mkdir(parents=True, exist_ok=True)
    good = png_bytes(Image.new("RGB", (120, 160), "white"))
    (folder / "zero.png").write_bytes(b"")
    (folder / "truncated.png").write_bytes(good[: len(good) // 2])
    (folder / "not_an_image.png").write_bytes(b"this is a text file, not a picture\n" * 20)
    (folder / "fake.pdf").write_bytes(b"%PDF-1.4 but nothing after it")
    (folder / "encrypted.pdf").write_bytes(encrypted_pdf_bytes())
    pdf = pdf_bytes()
    (folder / "corrupt.pdf").write_bytes(pdf[: len(pdf) // 2])
    Image.new("RGB", (1, 1), "black").save(folder / "one_px.png")
    Image.fromarray((np.arange(160 * 120, dtype=np.uint16) * 3).reshape(160, 120)).save(folder / "grey16.png")
    Image.new("CMYK", (120, 160), (0, 0, 0, 40)).save(folder / "cmyk.jpg")
    Image.new("RGBA", (120, 160), (0, 0, 0, 0)).save(folder / "rgba.png")
    Image.new("L", (6000, 2000), 255).save(folder / "huge.png")  # over max_side 4096: downscaled
    Image.new("1", (14000, 14000), 1).save(folder / "bomb.png")  # 196 Mpx: PIL calls it a bomb; over max_pixels
    return {"zero": "empty file", "truncated": "truncated", "not_an_image": "not an image", "fake": "not a readable PDF",
            "encrypted": "encrypted", "corrupt": "not a readable PDF", "one_px": "tiny image", "grey16": "16-bit",
            "cmyk": "CMYK", "rgba": "transparent", "huge": "downscaled", "bomb": "max_pixels"}
