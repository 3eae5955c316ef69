"""Loggers: local JSONL always; W&B (offline unless configured) as a thin sink, one run per job."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol


class Logger(Protocol):
    def log(self, figures: dict[str, Any], step: int | None = None) -> None: ...

    def finish(self) -> None: ...


class JsonlLogger:
    def __init__(self, path: Path):
        self.path = Path(path)

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **figures}, default=str) + "\n")

    def finish(self) -> None:
        pass


class WandbLogger:
    def __init__(self, out_dir: Path, project: str = "treedec", mode: str = "offline", config: dict | None = None,
                 name: str | None = None):
        import wandb

        self.run = wandb.init(project=project, mode=mode, dir=str(out_dir), config=config, name=name, reinit="finish_previous")

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        self.run.log(figures, step=step)

    def finish(self) -> None:
        self.run.finish()


class MultiLogger:
    def __init__(self, *loggers: Logger):
        self.loggers = loggers

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        for lg in self.loggers:
            lg.log(figures, step)

    def finish(self) -> None:
        for lg in self.loggers:
            lg.finish()


def make_logger(cfg: Any, out_dir: Path, run_config: Any = None) -> Logger:
    """`metrics.jsonl` in the output folder, plus W&B when `logger.name == wandb`."""
    loggers: list[Logger] = [JsonlLogger(Path(out_dir) / "metrics.jsonl")]
    if cfg is not None and cfg.get("name") == "wandb":
        from omegaconf import OmegaConf

        conf = OmegaConf.to_container(run_config, resolve=True) if run_config is not None else None
        loggers.append(WandbLogger(Path(out_dir), cfg.get("project", "treedec"), cfg.get("mode", "offline"), conf))
    return MultiLogger(*loggers)
