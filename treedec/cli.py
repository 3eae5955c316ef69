"""`python -m treedec <command> key=value ...` on Hydra.

Each command is a module `treedec.commands.<name>` with `main(cfg, out) -> summary`
and a config `treedec/conf/<name>.yaml`. Mistakes in the command line are reported in
one line naming what exists; `-m` runs a sweep (one output folder per job).
"""
from __future__ import annotations

import importlib
import sys
from importlib import resources

from treedec.errors import UserError

COMMANDS = {
    "depth": "oracle decoding depth of a data set (model-free)",
    "run": "parse pages with a strategy; quality, depth and speed (compare=STRATEGY for ratios)",
    "train": "train the tiny document VLM on synthetic pages (resumes from out/checkpoints)",
    "evaluate": "score predicted pages (Markdown or JSON per page) against OmniDocBench ground truth",
    "list": "list commands, config groups and their options",
}


def _conf_dir():
    return resources.files("treedec") / "conf"


def groups() -> dict[str, list[str]]:
    """Config groups (folders of treedec/conf) and their options."""
    return {d.name: sorted(f.name[:-5] for f in d.iterdir() if f.name.endswith(".yaml"))
            for d in _conf_dir().iterdir() if d.is_dir() and not d.name.startswith("_")}


def listing() -> str:
    lines = ["commands:"] + [f"  {k:<10} {v}" for k, v in COMMANDS.items()]
    lines += ["", "config groups (choose with group=option):"]
    lines += [f"  {g:<10} {', '.join(opts)}" for g, opts in sorted(groups().items())]
    return "\n".join(lines)


def _fail(msg: str) -> None:
    print(f"treedec: error: {msg}", file=sys.stderr)
    sys.exit(2)


def _usage() -> str:
    lines = ["usage: python -m treedec <command> [key=value ...] [-m]", "", "commands:"]
    lines += [f"  {k:<10} {v}" for k, v in COMMANDS.items()]
    lines += ["", "Outputs go to out=DIR (default runs/<command>-<time>). `python -m treedec list` shows the options."]
    return "\n".join(lines)


def validate(command: str, overrides: list[str], multirun: bool) -> None:
    """Raise UserError, in one line, for an unknown group option or key."""
    known = groups()
    plain = []
    for ov in overrides:
        if ov.startswith("hydra.") or ov.startswith("hydra/") or ov.startswith("~"):
            continue
        key, sep, value = ov.lstrip("+").partition("=")
        if not sep:
            raise UserError(f"expected key=value, got {ov!r}")
        if key in known:
            for v in (value.split(",") if multirun else [value]):
                if v not in known[key]:
                    raise UserError(f"unknown {key} {v!r}; choose from: {', '.join(known[key])}")
        plain.append(ov if not multirun or key in known else ov.split(",")[0])
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    try:
        with initialize_config_module("treedec.conf", version_base=None):
            cfg = compose(config_name=command, overrides=[p.split(",")[0] if multirun else p for p in plain])
            OmegaConf.to_container(cfg, resolve=False)
    except Exception as e:  # Hydra's composition errors carry a multi-line message
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        if "Could not override" in first or "not in" in text:
            bad = first.split("'")[1] if "'" in first else first
            near = _keys_near(command, plain, bad)
            if not near:  # a key under a value that is not a mapping (e.g. an unset dict knob)
                parent = bad.rpartition(".")[0]
                raise UserError(f"cannot set {bad!r}: {parent} is not a mapping here; set it whole, "
                                f"e.g. '{parent}={{key: value, ...}}'") from None
            raise UserError(f"unknown key {bad!r}; keys there: {', '.join(near)}") from None
        cause = str(e.__cause__ or "").strip().splitlines()
        if first.startswith("Error merging override") and cause:  # the reason is in the cause
            raise UserError(f"{first.removeprefix('Error merging override').strip()}: {cause[0]}") from None
        raise UserError(first) from None
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise UserError(f"{', '.join(missing)} must be set, e.g. {missing[0]}=...")


def _keys_near(command: str, overrides: list[str], key: str) -> list[str]:
    """Keys of the deepest existing config node on the path of `key`."""
    from hydra import compose, initialize_config_module
    from omegaconf import DictConfig

    groups_only = [o for o in overrides if o.partition("=")[0] in groups()]
    with initialize_config_module("treedec.conf", version_base=None):
        node = compose(config_name=command, overrides=groups_only)
    for part in key.split(".")[:-1]:
        if isinstance(node, DictConfig) and part in node:
            node = node[part]
    return [k for k in node.keys() if k != "hydra"] if isinstance(node, DictConfig) else []


def _task(command: str):
    def task(cfg) -> None:
        from hydra.core.hydra_config import HydraConfig

        from treedec.loggers import log_outputs, make_logger
        from treedec.outputs import RunOutput

        out = RunOutput(HydraConfig.get().runtime.output_dir, cfg)
        try:
            module = importlib.import_module(f"treedec.commands.{command}")
            summary = module.main(cfg, out)
            if summary is not None:
                if "meta" not in summary:  # commands that write their own summary return it with meta
                    summary = out.summary(summary, command)
                logger = make_logger(cfg.get("logger"), out.dir, cfg)
                log_outputs(logger, summary, out.dir)  # scalars; with W&B also plots, tables, report.html
                logger.finish()
                print(f"wrote {out.dir}/summary.json")
        except UserError as e:
            _fail(str(e))

    return task


def main(argv: list[str] | None = None) -> None:
    from treedec.conf import register_schemas

    register_schemas()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        _fail(f"unknown command {command!r}; commands: {', '.join(COMMANDS)}")
    if command == "list":
        print(listing())
        return
    flags = [a for a in rest if a.startswith("-")]
    overrides = [a for a in rest if not a.startswith("-")]
    multirun = "-m" in flags or "--multirun" in flags
    if "--help" not in flags and "-h" not in flags:
        try:
            validate(command, overrides, multirun)
        except UserError as e:
            _fail(str(e))
    import hydra

    sys.argv = [f"treedec {command}", *rest]
    hydra.main(config_path="conf", config_name=command, version_base=None)(_task(command))()
