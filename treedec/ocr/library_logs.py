"""The OCR libraries (rapidocr, rapid-layout, rapid-table) log to the terminal with their own
coloured handlers while their models load. `to_log()` sends those lines to Python logging
instead: under `python -m treedec` that is the run's log file (`<out>/run.log`), without the
ANSI colour codes; warnings and errors still reach the terminal."""
from __future__ import annotations

import contextlib
import io
import logging
import re
from typing import Iterator

PREFIXES = ("rapid",)  # logger names, lower-cased: RapidLayout, RapidOCR, rapid_table, ...
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
log = logging.getLogger("treedec.ocr")


def route() -> None:
    """The libraries' loggers: no handler of their own, warnings and up passed to the root's."""
    for name in list(logging.root.manager.loggerDict):
        if name.lower().startswith(PREFIXES):
            lib = logging.getLogger(name)
            for handler in list(lib.handlers):
                lib.removeHandler(handler)
            lib.propagate = True
            lib.setLevel(logging.WARNING)


@contextlib.contextmanager
def to_log() -> Iterator[None]:
    """While the libraries load (their handlers bind to the stderr of that moment): what they
    print goes to the log, a line at a time, at INFO (WARNING for their warnings and errors)."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            yield
    finally:
        route()
        for line in _ANSI.sub("", buf.getvalue()).splitlines():
            if line.strip():
                loud = any(f"[{lvl}]" in line for lvl in ("WARNING", "ERROR", "CRITICAL"))
                log.log(logging.WARNING if loud else logging.INFO, line)
