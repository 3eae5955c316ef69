"""`python -m treedec ARGS` run inside the test's own process: what a fresh interpreter would
print on stdout and stderr and exit with, without the ~4 CPU-seconds of imports (torch,
transformers, Hydra) each fresh interpreter pays; most of the suite's command-line tests check a
command's outputs, not its process.

Kept in a process of their own by the tests (`treedec(..., here=False)`): what only a process
shows (warnings printed once per interpreter, signals and kills, exit on Ctrl-C, a cold import),
vLLM, W&B and OpenVINO (which start services or leave process-wide state), and the sweeps whose
jobs run in processes of their own anyway. Each call here restores what a command changes for the process: the working folder,
`sys.argv`, the environment, torch's thread count, the root logger's handlers and Hydra's global
state."""
from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass

from conftest import ROOT


@dataclass
class Ran:
    """What `subprocess.run(..., capture_output=True, text=True)` returns, as far as tests read it."""
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def treedec_here(*args: str, env: dict | None = None) -> Ran:
    """Run `python -m treedec *args` in this process, in the repository's root, with `env` added to
    the environment; never raises for the command's own failure (its exit status says it)."""
    from hydra.core.global_hydra import GlobalHydra

    from treedec.cli import main

    import torch

    saved = (os.getcwd(), list(sys.argv), dict(os.environ), torch.get_num_threads(),
             list(logging.root.handlers), logging.root.level)
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    os.environ.update(env or {})
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code
                if isinstance(code, str):  # sys.exit("message"): printed, exit status 1
                    print(code, file=sys.stderr)
                    code = 1
            except Exception:  # what a fresh interpreter prints for an uncaught exception
                traceback.print_exc()
                code = 1
    finally:
        cwd, argv, environ, threads, handlers, level = saved
        os.chdir(cwd)
        sys.argv = argv
        os.environ.clear()
        os.environ.update(environ)
        torch.set_num_threads(threads)
        for h in logging.root.handlers[:]:  # Hydra's job logging replaced the root's handlers (pytest's too)
            if h not in handlers:
                logging.root.removeHandler(h)
                h.close()
        for h in handlers:
            if h not in logging.root.handlers:
                logging.root.addHandler(h)
        logging.root.setLevel(level)
        GlobalHydra.instance().clear()
    return Ran(["treedec", *args], int(code or 0), out.getvalue(), err.getvalue())


def treedec(*args: str, env: dict | None = None, here: bool = True, timeout: int = 600):
    """`python -m treedec *args` in this process (`here`, `treedec_here`) or in a process of its own
    (what a user sees: a fresh interpreter's warnings, exit on a signal), with `env` added."""
    if here:
        return treedec_here(*args, env=env)
    return subprocess.run([sys.executable, "-m", "treedec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, **(env or {})})


def page_files(out) -> dict[str, bytes]:
    """What `run` wrote of each page that holds no timing: its Markdown and OmniDocBench JSON
    (file name -> bytes), to compare two runs' pages byte for byte."""
    return {p.name: p.read_bytes() for p in sorted((out / "pages").iterdir())
            if p.name.endswith(".md") or p.name.endswith(".omnidocbench.json")}
