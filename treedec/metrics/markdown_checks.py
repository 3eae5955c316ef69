"""Signs that predicted Markdown is malformed (it is scored all the same, as read)."""
from __future__ import annotations

import re

_TABLE_OPEN, _TABLE_CLOSE = re.compile(r"<table\b", re.I), re.compile(r"</table>", re.I)


def markdown_problems(markdown: str) -> list[str]:
    """Human-readable notes: unbalanced HTML tables, display math or code fences."""
    problems = []
    opened, closed = len(_TABLE_OPEN.findall(markdown)), len(_TABLE_CLOSE.findall(markdown))
    if opened != closed:
        problems.append(f"unbalanced HTML tables ({opened} <table>, {closed} </table>)")
    if markdown.count("$$") % 2:
        problems.append("odd number of $$ delimiters")
    if markdown.count("\\[") != markdown.count("\\]"):
        problems.append("unbalanced \\[ \\] delimiters")
    if len(re.findall(r"^\s*```", markdown, re.M)) % 2:
        problems.append("unclosed code fence")
    return problems
