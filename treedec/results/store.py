"""The results store: a sweep's folder, where every finished job leaves `result.json`.

A job's key is the sha256 of what decides its result: the resolved config (less `out`,
`logger` and `force`, which do not), the code version (git commit plus a hash of
uncommitted changes to the code, else the package version; library versions), the
effective synthetic page settings (the model's page distribution under the `data.page`
knobs the user set), and the sha256 of the model's files (`model.path: null` names the
shipped model, whatever it is today). `result.json` is written last and atomically (a
temporary file, then `os.replace`), so a job killed half-way has none and counts as not
done. Rerunning a sweep skips the jobs whose key some `result.json` under the sweep's
folder holds; `+force=true` recomputes them. `compare` reads only these files."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from treedec.errors import UserError

RESULT = "result.json"
STORED = ("run", "depth")  # commands whose jobs the store keeps (train resumes from its checkpoints)
NOT_IN_KEY = ("out", "logger", "force")  # where results go and how they are logged, not what they are
_SKIP_DIRS = {"pages", "wandb", ".hydra", "checkpoints"}
_WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".json")  # weights and the configs that load them
_CODE = Path(__file__).resolve().parent


def _git(*args: str, cwd: Path = _CODE) -> str | None:
    try:
        r = subprocess.run(["git", *args], capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


@lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """The commit of this checkout and a hash of its uncommitted changes to the code
    (`treedec/`, `strategies/`), or, outside git, the package version; library versions."""
    from importlib.metadata import PackageNotFoundError, version

    libs = {}
    for pkg in ("treedec", "torch", "transformers"):
        try:
            libs[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    head = _git("rev-parse", "HEAD")
    if head is None:
        return {"package": libs.get("treedec"), "libraries": libs}
    top = Path(_git("rev-parse", "--show-toplevel").strip())
    paths = [p for p in ("treedec", "strategies") if (top / p).is_dir()]
    diff = hashlib.sha256((_git("diff", "HEAD", "--binary", "--", *paths, cwd=top) or "").encode())
    for name in sorted((_git("ls-files", "--others", "--exclude-standard", "--", *paths, cwd=top) or "").splitlines()):
        if name.endswith(".py") or name.endswith(".yaml"):
            diff.update(name.encode() + (top / name).read_bytes())
    dirty = diff.hexdigest() if diff.digest() != hashlib.sha256(b"").digest() else None
    return {"git": head.strip(), "uncommitted": dirty, "libraries": libs}


@lru_cache(maxsize=8)
def _files_sha256(folder: str, stamp: tuple) -> str:
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix in _WEIGHT_FILES and path.is_file():
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def model_folder(model_cfg: Mapping | None) -> Path | None:
    """The checkpoint folder a `model` config loads (None: no model, or random weights)."""
    if model_cfg is None or model_cfg.get("name") == "random":
        return None
    from treedec.models.vlm import SHIPPED

    return Path(model_cfg.get("path") or SHIPPED)


def weights_sha256(model_cfg: Mapping | None) -> str | None:
    """sha256 over the model folder's weight and config files; None for random weights (a
    function of `model.spec`, which the key holds) and for commands without a model."""
    folder = model_folder(model_cfg)
    if folder is None or not folder.is_dir():
        return None
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file())
    return _files_sha256(str(folder.resolve()), stamp)


def model_pages(model_cfg: Mapping | None) -> dict | None:
    """The page distribution a model reads (`VLM.pages`), without loading its weights."""
    if model_cfg is None:
        return None
    if model_cfg.get("name") == "random":
        size = model_cfg["spec"]["image_size"]
        return {"width": size, "height": size}
    from treedec.models.vlm import checkpoint_pages

    folder = model_folder(model_cfg)
    return checkpoint_pages(folder) if folder.is_dir() else None


def effective_pages(cfg: Mapping) -> dict | None:
    """The synthetic page settings a job's pages are generated with (`data=synth`): the model's
    page distribution (commands with a model) under the `data.page` knobs set; None otherwise."""
    data = cfg.get("data")
    if data is None or data.get("name") != "synth":
        return None
    from treedec.data import open_dataset

    return asdict(open_dataset(data, render=False, model_pages=model_pages(cfg.get("model"))).config)


def data_files(cfg: Mapping) -> dict | None:
    """For data read from files: what identifies them (the annotations' sha256, the images' names
    and sizes), so a changed data set is a new key."""
    data = cfg.get("data") or {}
    root = Path(str(data.get("root"))) if data.get("root") else None
    if root is None or not root.is_dir():
        return None
    files = sorted(p for p in root.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(root)}\0{p.stat().st_size}\0".encode())
        if p.suffix == ".json":
            h.update(p.read_bytes())
    return {"files": len(files), "sha256": h.hexdigest()}


def key_inputs(cfg: Mapping, command: str) -> dict[str, Any]:
    """What decides a job's result (the resolved config `cfg` as a plain dict)."""
    config = {k: v for k, v in cfg.items() if k not in NOT_IN_KEY}
    return {"command": command, "config": config, "code": code_version(), "pages": effective_pages(cfg),
            "data_files": data_files(cfg), "weights_sha256": weights_sha256(cfg.get("model"))}


def job_key(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def plain(cfg: Any) -> dict:
    """A Hydra/OmegaConf config as a resolved plain dict."""
    from omegaconf import DictConfig, OmegaConf

    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)


def write_atomic(path: Path, data: Any) -> None:
    """Write JSON to `path` atomically and durably (`treedec.run.outputs.write_text_atomic`)."""
    from treedec.run.outputs import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False, default=str), fsync=True)


def results(root: str | Path) -> Iterator[tuple[Path, dict]]:
    """Every finished job under `root`: (its folder, its result.json), in folder order."""
    root = Path(root)
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        if RESULT in files:
            try:
                data = json.loads((Path(here) / RESULT).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # not ours, or edited by hand: not a finished job
            if isinstance(data, dict) and "key" in data and "summary" in data:
                yield Path(here), data


def done_keys(root: str | Path) -> dict[str, Path]:
    return {data["key"]: folder for folder, data in results(root)}


@dataclass
class Job:
    """One job of a sweep: its key, the store it belongs to (the sweep's folder) and its own folder."""
    command: str
    key: str
    inputs: dict
    root: Path
    dir: Path
    overrides: list[str]

    @classmethod
    def of(cls, cfg: Any, command: str, job_dir: str | Path, root: str | Path, overrides: list[str]) -> "Job":
        inputs = key_inputs(plain(cfg), command)
        return cls(command, job_key(inputs), inputs, Path(root), Path(job_dir), list(overrides))

    def done(self) -> Path | None:
        """The folder of a finished job with this key under the store, if any."""
        return done_keys(self.root).get(self.key)

    def record(self, summary: Mapping[str, Any]) -> Path:
        """Write the job's result.json (last, atomically): the key, what made it, the job's
        overrides (the swept keys) and its summary."""
        path = self.dir / RESULT
        write_atomic(path, {"key": self.key, "command": self.command, "overrides": self.overrides,
                            "sweep": str(self.root), "inputs": self.inputs, "summary": dict(summary)})
        return path


def plan(command: str, overrides: list[str], root: str | Path) -> tuple[int, int]:
    """(done, to run) for the jobs of the sweep `overrides` describe, against the store at `root`."""
    from hydra import compose, initialize_config_module
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([o for o in overrides if not o.startswith("hydra.")])
    jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    have = done_keys(root) if Path(root).is_dir() else {}
    done = 0
    with initialize_config_module("treedec.conf", version_base=None):
        for job in jobs:
            if any(o.lstrip("+").partition("=")[::2] == ("force", "True") for o in job):
                continue
            try:
                key = job_key(key_inputs(plain(compose(config_name=command, overrides=job)), command))
            except Exception:  # a bad job (UserError or Hydra's): it runs, and says what is wrong
                continue
            done += key in have
    return done, len(jobs) - done


def sweep_dir(command: str, overrides: list[str]) -> str:
    """The default folder of a sweep, named by its command line so that rerunning the same
    command resumes it: runs/<command>-sweep-<hash of the overrides> (runs/: $TREEDEC_RUNS where set)."""
    kept = sorted(o for o in overrides if o.lstrip("+").partition("=")[0] not in NOT_IN_KEY)
    digest = hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:10]
    return f"{os.environ.get('TREEDEC_RUNS', 'runs')}/{command}-sweep-{digest}"
