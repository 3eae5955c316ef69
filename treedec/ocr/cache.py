"""Drafts cached per page: one OmniDocBench-style JSON per (image content, drafter version
and config), so a page is drafted once whatever data set or run it comes from."""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Sized
from pathlib import Path
from typing import Any

from treedec.io.omnidocbench import page_from_omnidocbench, page_to_omnidocbench
from treedec.page import Page

CACHE_ENV = "TREEDEC_DRAFT_CACHE"


def default_cache_dir() -> Path:
    """`$TREEDEC_DRAFT_CACHE`, else `~/.cache/treedec/drafts`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "treedec" / "drafts"


def image_hash(image) -> str:
    """SHA-256 of the image's RGB pixels and size (not of a file: the same pixels from a PNG,
    a JPEG decode or memory hash alike)."""
    rgb = image.convert("RGB")
    h = hashlib.sha256(f"{rgb.width}x{rgb.height}:".encode())
    h.update(rgb.tobytes())
    return h.hexdigest()


def cache_path(cache_dir: str | Path, image, tag: str) -> Path:
    """`<cache_dir>/<image sha256 (32 hex)>-<sha256 of the drafter tag (12 hex)>.json`."""
    tag_digest = hashlib.sha256(tag.encode()).hexdigest()[:12]
    return Path(cache_dir).expanduser() / f"{image_hash(image)[:32]}-{tag_digest}.json"


def _read(path: Path) -> Page | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return page_from_omnidocbench(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or damaged: draft again


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def draft_image_path(sample) -> str:
    """The image path a sample's draft names (what the drafter is given): its ground truth's,
    else `<name>.png`."""
    page = sample.page
    return page.image_path if page is not None and page.image_path else f"{sample.name}.png"


def lookup(cache_dir: str | Path, sample, tag: str) -> tuple[Path, Page | None]:
    """Where the draft of `sample` (one with an image) by the drafter `tag` is cached, and that
    draft, named after the sample (`draft_image_path`); None on a miss: draft the page and
    `store` it at that path. Every drafting path (`draft_pages`, the worker queue) asks here."""
    path = cache_path(cache_dir, sample.image, tag)
    page = _read(path)
    if page is not None:
        page.image_path = draft_image_path(sample)
    return path, page


def store(path: Path, data: dict[str, Any], sample) -> Page:
    """Write a fresh draft of `sample` (its OmniDocBench dict) where `lookup` said; the page
    read back from it, named after the sample: the same object a cache hit gives."""
    _write(path, data)
    page = page_from_omnidocbench(json.loads(json.dumps(data)))
    page.image_path = draft_image_path(sample)
    return page


def draft_pages(samples: Iterable, cache_dir: str | Path | None = None, drafter=None, config=None,
                progress: bool = True, drafters=None) -> dict[str, Page]:
    """Draft every sample (`name`, `image`, optional ground-truth `page`), reading and
    filling the cache. Returns page name -> draft `Page`.

    `drafter` defaults to `drafters.here(config)` (`treedec.ocr.drafters.Drafters`: the owner's
    drafter; None: a drafter of this call's own), taken on the first cache miss, so a run
    whose drafts are all cached needs none of the OCR packages. A sample without an image
    gets an empty page flagged in `info["draft_flag"]` (when its size is known) rather than
    being dropped."""
    from tqdm import tqdm

    from treedec.ocr.pipeline import PipelineConfig

    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    tag = drafter.tag if drafter is not None else (config or PipelineConfig()).tag()
    holder = {"drafter": drafter}

    def get_drafter():
        if holder["drafter"] is None:
            from treedec.ocr.drafters import Drafters

            holder["drafter"] = (drafters if drafters is not None else Drafters()).here(config)
        return holder["drafter"]

    out: dict[str, Page] = {}
    hits = 0
    total = len(samples) if isinstance(samples, Sized) else None
    bar = tqdm(samples, total=total, desc="drafting", unit="page", disable=not progress)
    for sample in bar:
        if sample.name in out:
            warnings.warn(f"two samples named {sample.name!r}: the later draft replaces the earlier")
        if sample.image is None:
            gt = sample.page
            if gt is None:
                warnings.warn(f"sample {sample.name!r} has no image and no page size: no draft")
                continue
            out[sample.name] = Page(width=gt.width, height=gt.height, image_path=draft_image_path(sample),
                                    info={"drafter": tag, "draft_flag": "no image: empty draft"})
            continue
        path, page = lookup(cache_dir, sample, tag)
        if page is None:
            draft = get_drafter().draft(sample.image, draft_image_path(sample))
            page = store(path, page_to_omnidocbench(draft), sample)
        else:
            hits += 1
        out[sample.name] = page
        bar.set_postfix(cached=hits)
    return out
