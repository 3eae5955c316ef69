"""`data=images`: page images and PDFs under a folder (or one file), read lazily.

The listing (names, order, PDF page counts) is made up front and is small; images are
decoded, and PDF pages rendered, only while iterating, one at a time, so memory does
not grow with the number of pages. A file that cannot be read is a sample without an
image whose `flags` say why: the run loop (`treedec.run.parse_pages`) keeps it as a flagged page, never drops it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from treedec.data.sample import Sample
from treedec.errors import UserError
from treedec.io.files import IMAGE_EXTS, PDF_EXTS, InputFile, find_inputs, parse_page_selection, pdf_page_name, selected
from treedec.io.images import load_image
from treedec.io.pdf import PdfError, PdfReader, page_count


@dataclass
class FileSample(Sample):
    """A page read from a file (`size` and `flags`: `Sample`'s, as reading it found them)."""
    source: str = ""  # path under the root
    document: str | None = None  # for a PDF page: the document's name
    number: int | None = None  # for a PDF page: its 1-based page number


@dataclass(frozen=True)
class _Planned:
    name: str
    file: InputFile
    number: int | None = None  # 1-based PDF page
    error: str | None = None  # known before reading (a PDF that does not open)


class FilesDataset:
    """Images and PDFs under `root`, parsed without ground truth.

    `pages`: which PDF pages (1-based: 5, "1-3,7", "4-", [1, 2]); `dpi`: PDF render
    resolution; `recursive`: search subfolders; `glob`: keep only matching paths;
    `max_pixels`: a page over this many pixels is not decoded (flagged); `max_side`: a
    larger page is downscaled to this longer side (flagged); `limit`: the first N pages."""

    def __init__(self, root: str, limit: int | None = None, pages=None, dpi: float = 150, recursive: bool = True,
                 glob: str | None = None, max_pixels: int = 64_000_000, max_side: int = 4096, render: bool = True):
        self.root = Path(str(root)).expanduser()
        if not self.root.exists():
            raise UserError(f"data.root {str(root)!r} does not exist")
        for key, value, low in (("dpi", dpi, 1), ("max_pixels", max_pixels, 1), ("max_side", max_side, 1),
                                ("limit", 1 if limit is None else limit, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise UserError(f"data.{key} must be a number >= {low}, got {value!r}")
        try:
            self.selection = parse_page_selection(pages)
        except ValueError as e:
            raise UserError(str(e)) from None
        self.dpi, self.max_pixels, self.max_side, self.render = float(dpi), int(max_pixels), int(max_side), render
        try:
            files, self.skipped = find_inputs(self.root, recursive=bool(recursive), glob=glob)
        except OSError as e:
            raise UserError(f"cannot list data.root {str(root)!r}: {e}") from None
        if not files:
            where = f"{root} (with data.glob={glob!r})" if glob else str(root)
            other = f"; found only {len(self.skipped)} other files, e.g. {self.skipped[0]!r}" if self.skipped else ""
            raise UserError(f"no images ({', '.join(IMAGE_EXTS)}) or PDFs ({', '.join(PDF_EXTS)}) in {where}{other}")
        self.plan = [p for f in files for p in self._plan(f)]
        if limit is not None:
            self.plan = self.plan[:int(limit)]
        if not self.plan:
            raise UserError(f"data.pages={pages!r} selects no page of the {len(files)} inputs in {root}")
        self.documents: dict[str, list[str]] = {}  # PDF name -> its page names, in page order
        for p in self.plan:
            if p.file.is_pdf:
                self.documents.setdefault(p.file.name, []).append(p.name)

    def _plan(self, f: InputFile) -> list[_Planned]:
        if not f.is_pdf:
            return [_Planned(f.name, f)]
        try:
            count = page_count(f.path)
        except PdfError as e:
            return [_Planned(f.name, f, error=f"unreadable: {e}")]
        if count == 0:
            return [_Planned(f.name, f, error="unreadable: the PDF has no pages")]
        return [_Planned(pdf_page_name(f.name, n, count), f, n) for n in selected(self.selection, count)]

    def __len__(self) -> int:
        return len(self.plan)

    def __iter__(self) -> Iterator[FileSample]:
        reader, open_path = None, None
        try:
            for p in self.plan:
                if p.error or not self.render:
                    yield self._sample(p, None, None, [p.error] if p.error else [])
                elif not p.file.is_pdf:
                    got = load_image(p.file.path, self.max_pixels, self.max_side)
                    yield self._sample(p, got.image, got.size, got.flags)
                else:
                    if open_path != p.file.path:
                        if reader is not None:
                            reader.__exit__()
                        reader, open_path = None, p.file.path
                        try:
                            reader = PdfReader(p.file.path)
                        except PdfError as e:
                            yield self._sample(p, None, None, [f"unreadable: {e}"])
                            continue
                    if reader is None:  # the document failed to open for an earlier page
                        yield self._sample(p, None, None, ["unreadable: the PDF could not be opened"])
                        continue
                    yield self._pdf_page(reader, p)
        finally:
            if reader is not None:
                reader.__exit__()

    def _pdf_page(self, reader: PdfReader, p: _Planned) -> FileSample:
        try:
            image, flags = reader.render(p.number - 1, self.dpi, self.max_pixels)
        except PdfError as e:
            return self._sample(p, None, None, [f"unreadable: {e}"])
        size = image.size
        if max(size) > self.max_side:
            from treedec.io.images import downscale

            image = downscale(image, self.max_side)
            flags.append(f"downscaled from {size[0]}x{size[1]} to {image.size[0]}x{image.size[1]} px "
                         f"(data.max_side={self.max_side})")
        return self._sample(p, image, size, flags)

    def _sample(self, p: _Planned, image, size, flags) -> FileSample:
        return FileSample(p.name, None, image, size=size, flags=list(flags), source=p.file.rel,
                          document=p.file.name if p.file.is_pdf else None, number=p.number)
