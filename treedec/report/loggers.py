"""Loggers: local JSONL always; W&B (offline unless configured) as a thin sink, one run per job.

`log_outputs` sends what a command wrote to every logger: the summary's scalars, and as
media its plots (PNG), report.html and tables (`by_concurrency`, per-page figures); the
JSONL logger keeps scalars only (the rest is in the output folder already)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

Rows = Sequence[Mapping[str, Any]]


class Logger(Protocol):
    def log(self, figures: dict[str, Any], step: int | None = None) -> None: ...

    def log_media(self, images: Mapping[str, Path], tables: Mapping[str, Rows], html: Mapping[str, Path],
                  step: int | None = None) -> None: ...

    def finish(self) -> None: ...


class JsonlLogger:
    def __init__(self, path: Path):
        self.path = Path(path)

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **figures}, default=str) + "\n")

    def log_media(self, images: Mapping[str, Path], tables: Mapping[str, Rows], html: Mapping[str, Path],
                  step: int | None = None) -> None:
        pass  # plots, tables and the report are files of the output folder already

    def finish(self) -> None:
        pass


class WandbLogger:
    def __init__(self, out_dir: Path, project: str = "treedec", mode: str = "offline", config: dict | None = None,
                 name: str | None = None, group: str | None = None):
        import wandb

        self.run = wandb.init(project=project, mode=mode, dir=str(out_dir), config=config, name=name, group=group,
                              reinit="finish_previous")

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        self.run.log(figures, step=step)

    def log_media(self, images: Mapping[str, Path], tables: Mapping[str, Rows], html: Mapping[str, Path],
                  step: int | None = None) -> None:
        """Plots as `plots/<name>` (wandb.Image), tables as `tables/<name>` (wandb.Table),
        HTML files (the report) under their key (wandb.Html), in one log call."""
        import wandb

        payload: dict[str, Any] = {f"plots/{k}": wandb.Image(str(p)) for k, p in images.items()}
        for k, rows in tables.items():
            if rows:
                columns = list(dict.fromkeys(c for r in rows for c in r))
                payload[f"tables/{k}"] = wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows],
                                                     allow_mixed_types=True)
        for k, p in html.items():
            payload[k] = wandb.Html(Path(p).read_text(encoding="utf-8"), inject=False)
        if payload:
            self.run.log(payload, step=step)

    def finish(self) -> None:
        self.run.finish()


class MultiLogger:
    def __init__(self, *loggers: Logger):
        self.loggers = loggers

    def log(self, figures: dict[str, Any], step: int | None = None) -> None:
        for lg in self.loggers:
            lg.log(figures, step)

    def log_media(self, images: Mapping[str, Path], tables: Mapping[str, Rows], html: Mapping[str, Path],
                  step: int | None = None) -> None:
        for lg in self.loggers:
            lg.log_media(images, tables, html, step)

    def finish(self) -> None:
        for lg in self.loggers:
            lg.finish()


def make_logger(cfg: Any, out_dir: Path, run_config: Any = None, group: str | None = None,
                name: str | None = None) -> Logger:
    """`metrics.jsonl` in the output folder, plus W&B when `logger.name == wandb`: one W&B run
    per job, named `name`, in the W&B group `group` (a sweep's jobs share one)."""
    loggers: list[Logger] = [JsonlLogger(Path(out_dir) / "metrics.jsonl")]
    if cfg is not None and cfg.get("name") == "wandb":
        from omegaconf import OmegaConf

        conf = OmegaConf.to_container(run_config, resolve=True) if run_config is not None else None
        loggers.append(WandbLogger(Path(out_dir), cfg.get("project", "treedec"), cfg.get("mode", "offline"), conf,
                                   name=name, group=group))
    return MultiLogger(*loggers)


def _flat(value: Any) -> Any:
    """A table cell: scalars as they are, lists of strings joined, anything else as JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    return json.dumps(value, default=str)


def summary_scalars(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers of a summary, one level of nested dicts flattened as `key.sub` (the baseline's)."""
    out: dict[str, Any] = {}
    for k, v in summary.items():
        if isinstance(v, (int, float)):
            out[k] = v
        elif isinstance(v, Mapping) and k != "meta":
            out.update({f"{k}.{sub}": x for sub, x in v.items() if isinstance(x, (int, float))})
    return out


def page_rows(out_dir: Path) -> list[dict[str, Any]]:
    """Per-page figures (`pages/<name>.json`) as flat table rows."""
    rows = []
    for path in sorted(Path(out_dir, "pages").glob("*.json")):
        if path.name.endswith(".omnidocbench.json"):
            continue
        fig = json.loads(path.read_text(encoding="utf-8"))
        rows.append({k: _flat(v) for k, v in fig.items() if not isinstance(v, Mapping)})
    return rows


def log_outputs(logger: Logger, summary: Mapping[str, Any], out_dir: Path) -> None:
    """What a command wrote into `out_dir`, to `logger`: the summary's scalars; its PNG plots;
    the summary's lists of records (e.g. `by_concurrency`) and the per-page figures as
    tables; `report.html`."""
    out_dir = Path(out_dir)
    logger.log(summary_scalars(summary))
    images = {p.stem: p for p in sorted(out_dir.glob("*.png"))}
    tables: dict[str, Rows] = {k: [{c: _flat(x) for c, x in r.items()} for r in v] for k, v in summary.items()
                               if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v)}
    pages = page_rows(out_dir)
    if pages:
        tables["pages"] = pages
    report = out_dir / "report.html"
    logger.log_media(images, tables, {"report": report} if report.is_file() else {})
