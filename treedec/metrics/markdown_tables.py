"""Markdown pipe tables -> HTML, with OmniDocBench's conversion rules.

Every `| ... |` row (the shortest run from a `|` to a `|` that ends a line) becomes a
one-row table; runs of such tables are merged into one, dropping any row line that holds
a `:` or `---` (separator rows, and also cells with a colon, as the official converter
does). Text positions after the first table shift, as in the official tool.
"""
from __future__ import annotations

import re

PIPE_ROW = re.compile(r"\|\s*.*?\s*\|\n", re.DOTALL)
_COMMENT = re.compile(r"<!--[\s\S]*?-->")
_ROW_TABLE = re.compile(r"<table>[\s\S]*?</table>")
_STRUCTURE_LINE = re.compile(r"</?t(able|head|body)>")


def has_pipe_table(text: str) -> bool:
    """At least two pipe rows: the official trigger for converting."""
    return len(PIPE_ROW.findall(text + "\n")) >= 2


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")[1:-1]]


def _row_html(run: str) -> str:
    """One matched run as an HTML table: its first line as header cells, lines from the
    third on as body rows (the second is taken for the separator)."""
    lines = [line.strip() for line in run.strip().split("\n")]
    out = ["<table>", "  <thead>", "    <tr>"]
    out += [f"      <th>{c}</th>" for c in _cells(lines[0])]
    out += ["    </tr>", "  </thead>", "  <tbody>"]
    for line in lines[2:]:
        out += ["    <tr>", *[f"      <td>{c}</td>" for c in _cells(line)], "    </tr>"]
    out += ["  </tbody>", "</table>"]
    return "\n".join(out) + "\n"


def _is_separator_like(line: str) -> bool:
    return ":" in line or "---" in line


def _merge_block(block: str) -> str:
    """The row tables of one block as one table: th -> td, structure lines dropped, a row
    table kept only when more than its two `<tr>` lines remain."""
    rows: list[str] = []
    for table in _ROW_TABLE.findall(_COMMENT.sub("", block)):
        lines = [line.replace("<th>", "<td>").replace("</th>", "</td>") if "<th>" in line else line
                 for line in table.split("\n")]
        kept = [line for line in lines if not _STRUCTURE_LINE.search(line)]
        if len(kept) > 2:
            rows += kept
    return "\n\n<table>\n" + "\n".join(rows) + "\n</table>\n\n"


def _merge_row_tables(text: str) -> str:
    """Runs of consecutive row tables merged, line by line, one line behind (the official
    state machine: a line is placed when the next one is seen)."""
    out: list[str] = []
    block, in_block, prev = "", False, ""
    for line in text.split("\n"):
        if "<table>" in line:
            in_block = True
            block += prev
        elif in_block:
            if not _is_separator_like(prev) and "</thead>" not in prev:
                block += "\n" + prev
            if "</table>" in prev:
                in_block = False
                out.append(_merge_block(block))
                block = ""
        else:
            out.append(prev)
        prev = line
    if prev:
        if in_block or "</table>" in prev:
            out.append(_merge_block(block + "\n" + prev))
        else:
            out.append(prev)
    return "\n".join(out)


def pipe_tables_to_html(text: str) -> str:
    """`text` with its pipe tables replaced by `<table border="1" >` HTML."""
    text = text.replace("\r", "") + "\n"
    for run in PIPE_ROW.findall(text):
        text = text.replace(run, _row_html(run), 1)
    merged = _merge_row_tables(text)
    return merged.replace("<table>", '<table border="1" >').replace("<td>", '<td colspan="1" rowspan="1">')
