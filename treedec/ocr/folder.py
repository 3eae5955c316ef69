"""Drafts made once, elsewhere, reused by any run: a folder of OmniDocBench JSON, one per page,
`<page name>.json` (what `python -m treedec draft out=DIR` writes into DIR/drafts), read by
`strategy.drafts=DIR`. A draft names the pixels it was made from (`page_info.image_sha256`): a
page whose draft is missing, unreadable or of other pixels gets an empty draft flagged with
the reason (`info["draft_flag"]`), never an exception."""
from __future__ import annotations

import json
from pathlib import Path

from treedec.errors import UserError
from treedec.io.omnidocbench import page_from_omnidocbench
from treedec.ocr.cache import draft_image_path, image_hash
from treedec.page import Page

SUBDIR = "drafts"  # where the `draft` command writes them under its out=DIR
HASH_KEY = "image_sha256"


def drafts_dir(path: str | Path) -> Path:
    """The folder of draft JSONs `path` names: `path/drafts` when `path` is a `draft` command's
    output folder, else `path` itself."""
    folder = Path(str(path)).expanduser()
    if (folder / SUBDIR).is_dir():
        folder = folder / SUBDIR
    if not folder.is_dir():
        raise UserError(f"strategy.drafts={path}: no such folder (pipeline, oracle, or a folder of drafts that "
                        "`python -m treedec draft out=DIR` wrote)")
    return folder


def draft_file(folder: str | Path, name: str) -> Path:
    return Path(folder) / f"{name}.json"


def flagged(sample, reason: str, tag: str = "") -> Page:
    """An empty draft of `sample`'s page that says why it is empty."""
    w, h = sample.image.size
    return Page(width=w, height=h, image_path=draft_image_path(sample), info={"drafter": tag, "draft_flag": reason})


def read_draft(folder: Path, sample) -> Page:
    """The draft of `sample` (one with an image) in `folder`, or an empty flagged one."""
    path = draft_file(folder, sample.name)
    if not path.is_file():
        return flagged(sample, f"no draft {path.name} in {folder}")
    try:
        page = page_from_omnidocbench(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        return flagged(sample, f"unreadable draft {path}: {type(e).__name__}: {e}")
    made_from = page.info.get(HASH_KEY)
    if made_from is not None and made_from != image_hash(sample.image):
        return flagged(sample, f"draft {path} was made from another image", page.info.get("drafter", ""))
    page.image_path = draft_image_path(sample)
    return page


def read_drafts(samples, path: str | Path) -> dict[str, Page]:
    """Page name -> draft, for every sample with an image (`read_draft`)."""
    folder = drafts_dir(path)
    return {s.name: read_draft(folder, s) for s in samples if s.image is not None}
