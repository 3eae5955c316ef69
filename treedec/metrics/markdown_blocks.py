"""Prediction Markdown -> blocks, with OmniDocBench's extraction rules.

In order: images and code fences are dropped; LaTeX tables, HTML tables, display
formulas (`$$...$$`, `\\[...\\]`), pipe tables and fenced code are cut out (each replaced
by spaces, so offsets stay put); what is left is split into paragraphs at blank lines
(at single newlines when there is no blank line). Inline `$...$` / `\\(...\\)` math stays
in its paragraph and is also emitted as an inline formula, as the official tool does.
`markdown_problems` notes signs of malformed Markdown (it is scored all the same, as read).
"""
from __future__ import annotations

import re

from treedec.metrics.blocks import FORMULA, LATEX_TABLE, TABLE, TEXT, PredBlock
from treedec.metrics.markdown_tables import has_pipe_table, pipe_tables_to_html
from treedec.metrics.table_html import find_html_tables, find_nested

_IMAGE = re.compile(r"!\[.*?\]\(.*?\)")
_FENCES = (re.compile(r"^```markdown\n?", re.M), re.compile(r"^```html\n?", re.M),
           re.compile(r"^```latex\n?", re.M), re.compile(r"```\n?$", re.M))
_TABLE_ENV = re.compile(r"\\begin{table}(.*?)\\end{table}", re.DOTALL)
_TABULAR_BEGIN, _TABULAR_END = re.compile(r"\\begin{tabular}"), re.compile(r"\\end{tabular}")
_MATH = re.compile(r"\$\$(.*?)\$\$|\\\[(.*?)\\\]|\$(.*?)\$|\\\((.*?)\\\)", re.DOTALL)
_DOLLAR_MATH = re.compile(r"\$\$(.*?)\$\$|\$(.*?)\$|\\\((.*?)\\\)", re.DOTALL)
_HTML_TABLE = re.compile(r"(<table.*?</table>)", re.DOTALL)
_CODE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
_LATEX_WRAPPERS = (re.compile(r"\\title\{(.*?)\}"), re.compile(r"\\title\s*\{\s*(.*?)\s*\}", re.DOTALL),
                   re.compile(r"\\text\s*\{\s*(.*?)\s*\}", re.DOTALL), re.compile(r"\\section\*?\{(.*?)\}"),
                   re.compile(r"\\section\*?\{\s*(.*?)\s*\}", re.DOTALL))


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _clean(md: str) -> str:
    md = _IMAGE.sub("", md)
    for fence in _FENCES:
        md = fence.sub("", md)
    md = re.sub(r"_{4,}", "____", md)
    md = re.sub(r" {4,}", "    ", md)
    for tag in ("<html>", "</html>", "<body>", "</body>"):
        md = md.replace(tag, "")
    return md


def _cut_latex_tables(text: str, out: list[PredBlock]) -> str:
    """`table` environments, then outermost `tabular` environments outside them."""
    spans = [m.span() for m in _TABLE_ENV.finditer(text)]
    scan = text
    for start, end in spans:
        scan = _blank(scan, start, end)
    spans += find_nested(scan, _TABULAR_BEGIN, _TABULAR_END, step=len(_TABULAR_END.pattern),
                         restart=len(_TABULAR_BEGIN.pattern))
    for start, end in sorted(spans):
        table = text[start:end]
        out.append(PredBlock(LATEX_TABLE, table, start))
        text = _blank(text, start, start + len(table))
    return text


def _cut_html_tables(text: str, out: list[PredBlock]) -> str:
    for start, end in find_html_tables(text):
        table = text[start:end]
        out.append(PredBlock(TABLE, table, start))
        text = _blank(text, start, start + len(table))
    return text


def _cut_formulas(text: str, out: list[PredBlock]) -> str:
    """Display math is cut out; inline math (`$x$`, `\\(x\\)`) is emitted as an inline
    formula and left in the text."""
    for m in _MATH.finditer(text):
        line = " ".join(m.group(0).strip().split("\n"))
        dollar = _DOLLAR_MATH.search(line)
        if dollar is None or dollar.group(1):
            if dollar is not None:
                line = _DOLLAR_MATH.sub(r"\\[\1\\]", line)
            out.append(PredBlock(FORMULA, line, m.start()))
            text = _blank(text, m.start(), m.end())
        else:
            out.append(PredBlock(FORMULA, _DOLLAR_MATH.sub(r"\\[\2\3\\]", line), m.start(), inline=True))
    return text


def _cut_pipe_tables(text: str, out: list[PredBlock]) -> str:
    """Pipe tables become HTML tables; the text is the converted one from here on."""
    if not has_pipe_table(text):
        return text
    text = pipe_tables_to_html(text)
    for m in _HTML_TABLE.finditer(text):
        out.append(PredBlock(TABLE, m.group(0).strip(), m.start()))
        text = _blank(text, m.start(), m.end())
    return text


def _cut_code(text: str, out: list[PredBlock]) -> str:
    for m in _CODE.finditer(text):
        out.append(PredBlock(TEXT, m.group(2).strip(), m.start()))
        text = _blank(text, m.start(), m.end())
    return text


def _unwrap_latex(text: str) -> str:
    for pattern in _LATEX_WRAPPERS:
        text = pattern.sub(r"\1", text)
    return text


def _paragraph_block(paragraph: str, position: int) -> PredBlock | None:
    lines = [line.strip() for line in paragraph.strip().split("\n") if line.strip()]
    text = "\n".join(lines)
    if not text:
        return None
    if text.startswith("<table") and text.endswith("</table>"):
        return PredBlock(TABLE, text, position)
    if text.startswith("$") and text.endswith("$"):
        return PredBlock(FORMULA, text, position) if text.replace("$", "").strip() else None
    return PredBlock(TEXT, text, position)


def _paragraphs(text: str, out: list[PredBlock]) -> None:
    """Split at blank lines (single newlines if there is none). A paragraph's position is
    the summed length of the paragraphs before it, separators not counted, as in the
    official tool."""
    parts = text.split("\n\n")
    if len(parts) == 1:
        parts = text.split("\n")
    position = 0
    for part in parts:
        block = _paragraph_block(part, position)
        if block is not None:
            out.append(block)
        position += len(part)


def markdown_to_blocks(markdown: str) -> list[PredBlock]:
    """The blocks of one page's Markdown, ordered by position."""
    out: list[PredBlock] = []
    text = _clean(markdown)
    for cut in (_cut_latex_tables, _cut_html_tables, _cut_formulas, _cut_pipe_tables, _cut_code):
        text = cut(text, out)
    _paragraphs(_unwrap_latex(text), out)
    return sorted(out, key=lambda b: b.position)


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
