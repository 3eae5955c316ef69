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
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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


def run_killed_after(args: list[str], pages: int, journaled: Callable[[], int], env: dict | None = None,
                     timeout: int = 600) -> Ran:
    """`python -m treedec *args` in a process of its own, killed by the test (SIGKILL) as soon as
    `journaled()` (how many pages its journal holds: `journal_lines`, `journal_objects`) reaches
    `pages`, polled every 20 ms: a real `kill -9`, at a moment the test picks, with no hook in
    treedec. Run it at runtime.max_pages=1: pages then finish in order, and the page after the
    `pages`-th is still decoding when the kill lands (its files may be partly written; its journal
    entry not). Its exit status is -9 where the kill came, its own where it ended first."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:  # never a full pipe
        proc = subprocess.Popen([sys.executable, "-m", "treedec", *args], stdout=out, stderr=err, text=True, cwd=ROOT,
                                env={**os.environ, **(env or {})})
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if journaled() >= pages:
                    proc.send_signal(signal.SIGKILL)
                    break
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                time.sleep(0.02)
        finally:
            if proc.poll() is None:  # timed out, or the test failed while polling
                proc.kill()
            proc.wait()
        out.seek(0)
        err.seek(0)
        return Ran(["treedec", *args], proc.returncode, out.read(), err.read())


def journal_lines(path: Path) -> Callable[[], int]:
    """How many whole lines the journal file `path` holds (0 before it is written): a run's
    `OUT/resume/done.jsonl`, one line a page done."""
    def count() -> int:
        try:
            return Path(path).read_bytes().count(b"\n")
        except OSError:
            return 0
    return count


def journal_objects(folder: Path) -> Callable[[], int]:
    """How many entries the journal folder `folder` holds (0 before it is made): a run into a URL's
    `resume/done/`, one object a page done, each moved there whole (its `.tmp` left out)."""
    def count() -> int:
        try:
            return sum(1 for p in Path(folder).iterdir() if p.name.endswith(".json") and not p.name.startswith("."))
        except OSError:
            return 0
    return count


def page_files(out) -> dict[str, bytes]:
    """What `run` wrote of each page that holds no timing: its Markdown and OmniDocBench JSON
    (file name -> bytes), to compare two runs' pages byte for byte."""
    return {p.name: p.read_bytes() for p in sorted((out / "pages").iterdir())
            if p.name.endswith(".md") or p.name.endswith(".omnidocbench.json")}


# One interpreter that imports what every `python -m treedec` imports, then forks once per command
# line: each child runs `python -m treedec ARGS` as a fresh interpreter would from there on
# (its warnings printed once, its own atexit), stdout and stderr to files of its own. What the
# shared imports print goes to the interpreter's own stderr (`treedec_forked` returns it).
FORKED = r"""
import atexit, json, os, runpy, sys, traceback
sys.path.insert(0, os.getcwd())  # (`python -m`: the working folder first)
import treedec.cli  # the modules every command line imports (its first import, then the rest)
for name in {common!r}:
    __import__(name)
cases, folder = json.loads(sys.argv[1]), sys.argv[2]
codes = []
for i, args in enumerate(cases):
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd, what in ((1, "out"), (2, "err")):
            os.dup2(os.open(f"{{folder}}/{{i}}.{{what}}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv = ["treedec", *args]
        try:
            runpy.run_module("treedec", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code
        except BaseException:
            traceback.print_exc()
            code = 1
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(int(code or 0))
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
json.dump(codes, open(f"{{folder}}/codes.json", "w"))
"""
# what every command line of the tests imports (each is in `python -X importtime -m treedec ...` of all)
COMMON = ("torch", "transformers", "transformers.cache_utils", "hydra", "omegaconf", "treedec.conf",
          "treedec.models.vlm", "treedec.engine.engine", "treedec.runtimes.embedded")


def treedec_forked(cases: list[list[str]], folder, env: dict | None = None,
                   timeout: int = 600) -> tuple[list[Ran], str]:
    """`python -m treedec ARGS` for each of `cases`, each in a process of its own forked from one
    that imported `COMMON` (seconds of imports paid once), with `env` added: what each prints and
    exits with, and what the shared imports printed on stderr (a fresh interpreter would print it
    for every case)."""
    import json

    r = subprocess.run([sys.executable, "-c", FORKED.format(common=COMMON), json.dumps(cases), str(folder)],
                       capture_output=True, text=True, cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    codes = json.loads((folder / "codes.json").read_text())
    return [Ran(["treedec", *args], code, (folder / f"{i}.out").read_text(), (folder / f"{i}.err").read_text())
            for i, (args, code) in enumerate(zip(cases, codes))], r.stderr
