"""`python -m treedec <command> key=value ...` on Hydra.

Each command is a module `treedec.commands.<name>` with `main(cfg, out) -> summary`
and a config `treedec/conf/<name>.yaml`. Mistakes in the command line are reported in
one line naming what exists; `-m` runs a sweep (one output folder per job).
"""
from __future__ import annotations

import importlib
import sys
from importlib import resources
from pathlib import Path

from treedec.errors import UserError
from treedec.run.remote import is_url

COMMANDS = {
    "depth": "oracle decoding depth of a data set (model-free)",
    "run": "parse pages with a strategy; quality, depth and speed (compare=STRATEGY for ratios)",
    "train": "train the tiny document VLM on synthetic pages (resumes from out/checkpoints)",
    "evaluate": "score predicted pages (Markdown or JSON per page) against OmniDocBench ground truth",
    "draft": "the pipeline drafter alone: each page's draft as OmniDocBench JSON (for strategy.drafts=DIR), CPU-s per page",
    "compare": "one table (Markdown + HTML with plots) across the jobs of sweeps: runs=DIR or runs=[A,B]",
    "list": "list commands, config groups and their options",
    "tiny": "a tiny random replica of a real VLM architecture: model_type=NAME [format=treedec|hpd] out=DIR",
    "convert": "an internvl_chat checkpoint (HPD-Parsing's layout) as transformers' internvl: src=DIR out=DIR [format=hpd]",
    "check": "decode a few pages with treedec and with transformers' generate; exit 1 where they diverge",
    "serve": "an OpenAI-compatible server whose decoding is a strategy: [port=8000] [api_key=KEY] (docs/serving.md)",
}


def _conf_dir():
    return resources.files("treedec") / "conf"


def groups(plugins: bool = True) -> dict[str, list[str]]:
    """Config groups (folders of treedec/conf) and their options (`plugins`: with the strategy
    plug-ins, whose registry imports torch)."""
    from treedec.conf import plugin_strategies

    found = {d.name: sorted(f.name[:-5] for f in d.iterdir() if f.name.endswith(".yaml"))
             for d in _conf_dir().iterdir() if d.is_dir() and not d.name.startswith("_")}
    if plugins:
        found["strategy"] = sorted([*found["strategy"], *plugin_strategies()])  # + the fork-rule plug-ins
    return found


def listing() -> str:
    lines = ["commands:"] + [f"  {k:<10} {v}" for k, v in COMMANDS.items()]
    lines += ["", "config groups (choose with group=option):"]
    lines += [f"  {g:<10} {', '.join(opts)}" for g, opts in sorted(groups().items())]
    return "\n".join(lines + ["", "formats (choose with model.format=NAME):", *format_lines()])


def format_lines() -> list[str]:
    from treedec.formats import FORMATS, get_format

    return [f"  {n:<10} {get_format(n).describe()}" for n in FORMATS.names()]


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
    known = groups(plugins=command != "draft")  # draft has no strategy (and imports no torch)
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
        plain.append(ov)
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    try:
        if multirun:  # the sweep's first job, as Hydra splits it (a list value such as [8,8] is one value)
            plain = _first_job(plain)
        with initialize_config_module("treedec.conf", version_base=None):
            cfg = compose(config_name=command, overrides=plain)
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


def _first_job(overrides: list[str]) -> list[str]:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), 1)[0][0]


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


def _seed(seed) -> None:
    """Every job starts from its `seed` (jobs of a sweep share one process)."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:  # commands that use torch import it; `compare` runs without
        sys.modules["torch"].manual_seed(seed)


def _task(command: str):
    def task(cfg) -> None:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        try:
            _job(command, cfg, hc)
        except UserError as e:
            from treedec.run.outputs import discard_start

            discard_start(hc.runtime.output_dir, f"{hc.job.name}.log")  # a mistake leaves no run folder behind
            _fail(str(e))

    return task


def _job(command: str, cfg, hc) -> None:
    """One job of `command` (Hydra's config `hc`): not rerun where the results store holds it
    done (a sweep's, unless +force=true), run in a process of its own (a sweep's, with
    fresh_process=true) or here; its summary recorded in the store."""
    from hydra.types import RunMode

    from treedec.results import store

    sweep = hc.mode == RunMode.MULTIRUN
    job = None
    if command in store.STORED:  # the results store: a finished job of a sweep is not rerun
        job = store.Job.of(cfg, command, hc.runtime.output_dir, hc.sweep.dir if sweep else hc.runtime.output_dir,
                           list(hc.overrides.task))
        found = job.done() if sweep and not cfg.get("force") else None
        if found is not None:
            print(f"done, not rerun: {found} (+force=true recomputes)")
            return
    afresh = []  # a job the store runs starts afresh where its folder's pages cannot resume (treedec.run.resume)
    if sweep and command == "run":
        from treedec.run.resume import resumes_in
        if not resumes_in(cfg, hc.runtime.output_dir):
            cfg.resume, afresh = False, ["resume=false"]
    if sweep and cfg.get("fresh_process"):  # the job in a process of its own: no job reads slower
        summary = _in_fresh_process(command, [*hc.overrides.task, *afresh], hc.runtime.output_dir)  # for those before it
        if job is not None:
            job.record(summary)
    else:
        _run_here(command, cfg, hc, sweep, job)


def _run_here(command: str, cfg, hc, sweep: bool, job=None) -> dict | None:
    """`command` run in this process: its summary written (with meta) and logged (scalars; with
    W&B also plots, tables, report.html) and recorded in the results store (`job`); for `out=` a
    URL, its outputs copied there, finished or not."""
    module = importlib.import_module(f"treedec.commands.{command}")
    if cfg.get("seed") is not None:
        _seed(int(cfg.seed))
    remote = _remote(cfg, command, hc.runtime.output_dir)
    try:
        summary = _outputs(command, module, cfg, hc, sweep, remote)
        if job is not None and summary is not None:
            job.record(summary)  # the results store's result.json
        return summary
    finally:
        if remote is not None and not isinstance(sys.exc_info()[1], UserError):  # a user's mistake leaves nothing there
            remote.push_rest()


def _remote(cfg, command: str, mirror: str):
    """For `out=` a filesystem URL: where it goes (treedec.run.remote), what earlier sittings left there
    pulled into the mirror for `run`. None for a local folder."""
    if not is_url(str(cfg.out)):
        return None
    from treedec.run.remote import RemoteOut

    remote = RemoteOut(str(cfg.out), mirror)
    if command == "run":
        pulled = remote.pull(resume=cfg.get("resume", True))
        if pulled:
            print(f"note: out={cfg.out}: {pulled} pages of earlier sittings read back", file=sys.stderr)
    return remote


def _outputs(command: str, module, cfg, hc, sweep: bool, remote) -> dict | None:
    """`module`'s command run into its folder: its summary (None where it writes none)."""
    from treedec.report.loggers import log_outputs, make_logger
    from treedec.run.outputs import RunOutput

    if command == "run":  # a rerun refused before it writes anything into the folder (treedec.run.resume)
        from treedec.run.resume import check
        check(cfg, hc.runtime.output_dir)
    out = RunOutput(hc.runtime.output_dir, cfg, remote=remote)
    summary = module.main(cfg, out)
    if summary is None:
        return None
    if "meta" not in summary:  # commands that write their own summary return it with meta
        summary = out.summary(summary, command)
    logger = make_logger(cfg.get("logger"), out.dir, cfg, group=Path(hc.sweep.dir).name if sweep else None,
                         name=hc.job.override_dirname or None)
    log_outputs(logger, summary, out.dir)
    logger.finish()
    path = out.dir / "summary.json"
    kept = path.is_file() and path.stat().st_mtime < out.started  # an earlier sitting's, left as it was (treedec.run.resume)
    print(f"{'kept' if kept else 'wrote'} {f'{cfg.out}/summary.json' if remote is not None else path}")
    return summary


def _in_fresh_process(command: str, overrides: list[str], out: str) -> dict:
    """Run one job of a sweep as `python -m treedec COMMAND overrides out=OUT` in a new process
    and return the summary it wrote (docs/forced.md, 'Fair timing')."""
    import json
    import subprocess

    args = [o for o in overrides if o.lstrip("+").partition("=")[0] != "out"] + [f"out='{out}'"]  # quoted: job folders hold '='
    rc = subprocess.run([sys.executable, "-m", "treedec", command, *args]).returncode
    summary = Path(out) / "summary.json"
    if rc != 0 or not summary.is_file():
        raise UserError(f"the job {' '.join(args)} failed in its own process (exit {rc})")
    return json.loads(summary.read_text(encoding="utf-8"))


def _stored() -> tuple[str, ...]:
    from treedec.results.store import STORED

    return STORED


def _resume(command: str, overrides: list[str], rest: list[str]) -> list[str]:
    """A sweep goes to out=DIR (default: a folder named by the command line, so that the same
    command resumes it); say how many of its jobs the store holds already."""
    from treedec.results.store import plan, sweep_dir

    out = next((o.partition("=")[2] for o in overrides if o.partition("=")[0] == "out"), None)
    if out is None:
        out = sweep_dir(command, overrides)
        rest = [*rest, f"out={out}"]
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([o for o in overrides if not o.startswith("hydra")])
    except Exception as e:  # Hydra's parse errors: the first line says what is wrong
        raise UserError(str(e).strip().splitlines()[0]) from None
    fixed = sorted({"out", "logger", "force"} | {o.key_or_group for o in parsed if not o.is_sweep_override()})
    # a job's folder is named by the keys swept only (all overrides make names too long for the file system)
    rest = [*rest, f"hydra.job.config.override_dirname.exclude_keys=[{','.join(fixed)}]"]
    done, todo = plan(command, [o for o in overrides if o.partition("=")[0] != "out"], out)
    print(f"sweep {out}: {done} done, {todo} to run" + (" (+force=true recomputes)" if done else ""))
    return rest


def main(argv: list[str] | None = None) -> None:
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
    from treedec.conf import register_resolvers

    register_resolvers()
    if command == "draft":  # the drafter alone: data, no model and no torch (its CPU per page counts start-up)
        from treedec.conf import register_data_schemas

        register_data_schemas()
    elif command != "compare":  # compare reads result files only: no model, data or torch
        from treedec.conf import register_schemas

        register_schemas()
    flags = [a for a in rest if a.startswith("-")]
    overrides = [a for a in rest if not a.startswith("-")]
    multirun = "-m" in flags or "--multirun" in flags
    if multirun and any(is_url(o.partition("=")[2]) for o in overrides if o.partition("=")[0] == "out"):
        _fail("out= as a URL is for one job, not a sweep (-m): sweep into a local or mounted folder")
    if "--help" not in flags and "-h" not in flags:
        try:
            validate(command, overrides, multirun)
        except UserError as e:
            _fail(str(e))
    if multirun and command in _stored():
        try:
            rest = _resume(command, overrides, rest)
        except UserError as e:
            _fail(str(e))
    import hydra

    sys.argv = [f"treedec {command}", *rest]
    hydra.main(config_path="conf", config_name=command, version_base=None)(_task(command))()
