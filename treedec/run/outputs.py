"""The outputs contract (docs/usage.md, "Outputs"; docs/architecture.md): every command writes
into one folder (`out=DIR`) `summary.json` (stable snake_case keys plus `meta`), `pages/`
(per-page figures and flags; `run` adds each parsed page as OmniDocBench JSON and
Markdown), `config.yaml` (the resolved config), `metrics.jsonl`, plots and a report. A
page that failed or was cut by a limit is written with a flag saying why, never dropped."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from treedec.cpu import cpu_info
from treedec.io import page_to_markdown, page_to_omnidocbench
from treedec.page import Page


def _git_hash() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                           cwd=Path(__file__).parent)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("treedec", "torch", "transformers", "hydra-core"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _json_default(o: Any):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def write_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False, default=_json_default))


def write_text_atomic(path: Path, text: str, fsync: bool = False) -> None:
    """Write `text` to `path` through a temporary file beside it and `os.replace`: a reader (or
    a run that resumes after a kill) finds the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # made as any file is (umask)
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunOutput:
    """One command's output folder."""

    def __init__(self, out: str | Path, config: Any = None, remote: Any = None):
        self.dir = Path(out)
        self.remote = remote  # out= a filesystem URL: this folder is its local mirror (treedec.run.remote.RemoteOut)
        self.pages_dir = self.dir / "pages"
        self.pages_dir.mkdir(parents=True, exist_ok=True)
        self.started = time.time()
        if config is not None:
            from omegaconf import OmegaConf

            (self.dir / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=True), encoding="utf-8")

    def page(self, name: str, figures: dict[str, Any], page: Page | None = None) -> None:
        """Per-page figures in `pages/<name>.json`; the parsed page, when there is one,
        as `pages/<name>.omnidocbench.json` and `pages/<name>.md`."""
        write_json(self.pages_dir / f"{name}.json", {"name": name, **figures})
        if page is not None:
            write_json(self.pages_dir / f"{name}.omnidocbench.json", page_to_omnidocbench(page))
            write_text_atomic(self.pages_dir / f"{name}.md", page_to_markdown(page))

    def summary(self, figures: dict[str, Any], command: str) -> dict[str, Any]:
        data = {**figures, "meta": {"command": command, "git": _git_hash(), "versions": _versions(), "cpu": cpu_info(),
                                    "wall_s": round(time.time() - self.started, 3),
                                    "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}}
        write_json(self.dir / "summary.json", data)
        return data


STARTED = ("config.yaml", ".hydra", "pages", "resume")  # what a command's start writes before any result


def discard_start(folder: str | Path, log_name: str) -> bool:
    """After a command failed on a user's mistake (a config error): remove what its start
    wrote into `folder` (the resolved config, Hydra's record, its log, an empty `pages/`) and
    the folder itself when that leaves it empty; a folder holding anything else (pages, a
    summary, older results) is kept whole. True when the folder is gone."""
    folder = Path(folder)
    if not folder.is_dir():
        return True
    pages = folder / "pages"
    if pages.is_dir() and any(pages.iterdir()):
        return False
    if any(p.name not in (*STARTED, log_name) for p in folder.iterdir()):
        return False
    shutil.rmtree(folder)
    return True
