"""Which files under a root are pages to read, in what order, under what names.

A root is a folder (searched recursively by default) or one file. Order is natural
(`page2` before `page10`) on the path relative to the root, so the same tree gives the
same order everywhere. A page's name is its path under the root without the extension,
folders joined by `__` (names are file names in `pages/`); two files that would share a
name (`a.png`, `a.jpg`) keep their extensions instead. Files of other kinds are listed
as skipped (the summary names them), never silently ignored."""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif")
PDF_EXTS = (".pdf",)
SEP = "__"


@dataclass(frozen=True)
class InputFile:
    path: Path
    rel: str  # path under the root, '/'-separated (the file's own name for a single-file root)
    name: str  # page name stem (unique among the inputs)

    @property
    def is_pdf(self) -> bool:
        return self.path.suffix.lower() in PDF_EXTS


def natural_key(rel: str) -> list:
    """Digits compare as numbers, the rest case-folded then exactly (a total, stable order)."""
    return [(0, int(t), t) if t.isdigit() else (1, t.casefold(), t) for t in re.split(r"(\d+)", rel)]


def find_inputs(root: str | Path, recursive: bool = True, glob: str | None = None) -> tuple[list[InputFile], list[str]]:
    """The readable-kind files under `root` (images, PDFs) and the other files found (skipped).
    `glob` filters by the path under the root (fnmatch: `*` also crosses folders, so
    `*.pdf` matches PDFs at any depth) or by the file name."""
    root = Path(root)
    if root.is_file():
        rels = [root.name]
        base = root.parent
    else:
        base = root
        rels = []
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            if not recursive:
                dirs.clear()
            prefix = Path(folder).relative_to(root).as_posix()
            rels += [f if prefix == "." else f"{prefix}/{f}" for f in files]
    if glob:
        rels = [r for r in rels if fnmatch.fnmatch(r, glob) or fnmatch.fnmatch(r.rsplit("/", 1)[-1], glob)]
    rels.sort(key=natural_key)
    kinds = IMAGE_EXTS + PDF_EXTS
    keep = [r for r in rels if Path(r).suffix.lower() in kinds]
    skipped = [r for r in rels if Path(r).suffix.lower() not in kinds]
    return [InputFile(base / r, r, n) for r, n in zip(keep, page_names(keep))], skipped


def page_names(rels: list[str]) -> list[str]:
    stems = [_flat(r.rsplit(".", 1)[0] if "." in r.rsplit("/", 1)[-1] else r) for r in rels]
    seen: dict[str, int] = {}
    for s in stems:
        seen[s] = seen.get(s, 0) + 1
    return [s if seen[s] == 1 else _flat(r) for s, r in zip(stems, rels)]


def _flat(rel: str) -> str:
    return rel.replace("/", SEP)


def pdf_page_name(doc_name: str, number: int, count: int) -> str:
    """`report.p007`: the document's name and the 1-based page number, zero-padded so
    names sort in page order."""
    return f"{doc_name}.p{number:0{max(3, len(str(count)))}d}"


def parse_page_selection(spec, what: str = "data.pages") -> set[int] | None:
    """1-based page numbers from `5`, `"1-3,7"`, `[1, 2]`, `"2-"` (to the end) or None (all).
    Raises ValueError with a one-line reason."""
    if spec is None or spec == "" or spec == "all":
        return None
    if isinstance(spec, bool):
        raise ValueError(f"{what} must be page numbers like 1-3,7; got {spec!r}")
    if isinstance(spec, int):
        items = [str(spec)]
    elif isinstance(spec, str):
        items = [p.strip() for p in spec.split(",") if p.strip()]
    elif isinstance(spec, (list, tuple)):
        items = [str(p).strip() for p in spec]
    else:
        raise ValueError(f"{what} must be page numbers like 1-3,7; got {spec!r}")
    out: set[int] = set()
    for item in items:
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d*))?", item)
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"{what}: {item!r} is not a page number or range (pages count from 1: 1-3,7,10-)")
        lo = int(m.group(1))
        if m.group(2) is None:
            out.add(lo)
        elif m.group(2) == "":
            out.add(-lo)  # open range: from lo to the end, resolved per document
        else:
            hi = int(m.group(2))
            if hi < lo:
                raise ValueError(f"{what}: range {item!r} ends before it starts")
            out.update(range(lo, hi + 1))
    return out


def selected(selection: set[int] | None, count: int) -> list[int]:
    """The 1-based page numbers of a `count`-page document that `selection` keeps."""
    if selection is None:
        return list(range(1, count + 1))
    open_from = min((-s for s in selection if s < 0), default=None)
    return [n for n in range(1, count + 1) if n in selection or (open_from is not None and n >= open_from)]
