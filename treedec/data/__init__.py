"""Data sets by name: `synth` (generated), `omnidocbench` (annotated JSON + images),
`images` (page images and PDFs under a folder, or one file; no ground truth; read
lazily: `treedec.data.files`)."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator

from treedec.data.files import FileSample, FilesDataset
from treedec.data.sample import Sample
from treedec.data.synth import SynthConfig, generate_page, synth_config
from treedec.errors import UserError

__all__ = ["DATASETS", "FileSample", "FilesDataset", "OmniDocBenchDataset", "Sample", "SynthDataset", "open_dataset"]


class SynthDataset:
    """`pages` generated pages from seed `seed` on (held-out seeds by default).

    `page` holds generator knobs (SynthConfig); unset (None) knobs come from `base`, the page
    distribution a model was trained on (`VLM.pages`), then from SynthConfig's defaults."""

    def __init__(self, pages: int = 100, seed: int = 1_000_000, page: dict[str, Any] | None = None, render: bool = True,
                 base: dict[str, Any] | None = None):
        page = {k: v for k, v in (page or {}).items() if v is not None}  # None: unset
        known = {f.name for f in fields(SynthConfig)}
        bad = set(page) - known
        if bad:
            raise UserError(f"unknown data.page keys {sorted(bad)}; known: {', '.join(sorted(known))}")
        try:
            self.config = synth_config(page, {k: v for k, v in (base or {}).items() if k in known})
        except (TypeError, ValueError) as e:
            raise UserError(f"bad synthetic page config: {e}") from None
        for key, value in (("pages", pages), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(f"data.{key} must be a whole number, got {value!r}")
        if pages < 1:
            raise UserError(f"data.pages must be >= 1, got {pages}")
        if seed < 0:
            raise UserError(f"data.seed must be >= 0, got {seed}")
        self.pages, self.seed, self.render = pages, seed, render

    def __len__(self) -> int:
        return self.pages

    def __iter__(self) -> Iterator[Sample]:
        for i in range(self.pages):
            yield generate_page(self.seed + i, self.config, render=self.render)


class OmniDocBenchDataset:
    """Pages of an OmniDocBench JSON under `root` with their images in `root/images`."""

    def __init__(self, root: str, json: str | None = None, limit: int | None = None, render: bool = True):
        from treedec.io import load_omnidocbench

        self.root = Path(root)
        if not self.root.is_dir():
            raise UserError(f"data.root {root!r} is not a folder")
        if json is None:
            found = sorted(self.root.glob("*.json"))
            found = [p for p in found if "metric" not in p.name]
            if len(found) != 1:
                raise UserError(f"expected one OmniDocBench JSON in {root}, found {[p.name for p in found] or 'none'}; "
                                "set data.json")
            path = found[0]
        else:
            path = self.root / json
        try:
            self.pages = load_omnidocbench(path)
        except (FileNotFoundError, ValueError, KeyError) as e:
            raise UserError(f"cannot read {path}: {e}") from None
        if limit is not None:
            self.pages = self.pages[:limit]
        self.render = render

    def __len__(self) -> int:
        return len(self.pages)

    def __iter__(self) -> Iterator[Sample]:
        from treedec.io.images import load_image

        for page in self.pages:
            if not self.render:
                yield Sample(page.name, page, None)
                continue
            path = self.root / "images" / page.image_path
            if not path.is_file():
                yield FileSample(page.name, page, None, flags=[f"unreadable: no image at {path}"])
                continue
            got = load_image(path, max_pixels=64_000_000, max_side=4096)  # a bad image: flagged by the consumer
            if got.size and (page.height, page.width) == tuple(got.size) != (page.width, page.height):
                # page_info's width and height swapped (6 of the 12 demo pages: the boxes fit the upright image, as
                # read after its EXIF rotation): without this, serialization clips every box to the wrong frame
                page.width, page.height = got.size
            yield FileSample(page.name, page, got.image, size=got.size, flags=got.flags)


DATASETS = {"synth": SynthDataset, "omnidocbench": OmniDocBenchDataset, "images": FilesDataset}


def open_dataset(cfg: dict[str, Any], render: bool = True, model_pages: dict[str, Any] | None = None):
    """Build the data set a `data` config names (`name` plus its keyword arguments).
    `model_pages`: the synthetic page distribution the model was trained on, the default
    for every `data.page` knob left unset (synthetic data only)."""
    from omegaconf import DictConfig, OmegaConf

    cfg = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    name = cfg.pop("name", None)
    if name not in DATASETS:
        raise UserError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
    if name == "synth" and model_pages:
        cfg["base"] = model_pages
    try:
        return DATASETS[name](**cfg, render=render)
    except TypeError as e:
        raise UserError(f"bad data config for {name}: {e}") from None
