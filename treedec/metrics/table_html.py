"""Table HTML: finding tables in text, the normalized form TEDS compares, cell texts."""
from __future__ import annotations

import html
import re
import unicodedata

_TABLE_BODY = re.compile(r"<table\b[^>]*>(.*)</table>", re.DOTALL | re.IGNORECASE)
_DROPPED_ATTRS = tuple(re.compile(f'( {a}=".*?")') for a in ("style", "height", "width", "align", "class"))
_DROPPED_TAGS = ("<sup>", "</sup>", "<sub>", "</sub>", "<span>", "</span>", "<div>", "</div>", "<p>", "</p>",
                 '<spandata-span-identity="">')
_COLGROUP = re.compile(r"<colgroup>.*?</colgroup>")
_CDOT = re.compile(r"\$\\cdot\$")
_TABLE_WRAP = ('<html><body><table border="1" >', "</table></body></html>")


def find_nested(text: str, begin: re.Pattern, end: re.Pattern, step: int, restart: int) -> list[tuple[int, int]]:
    """Spans of outermost begin...end pairs, scanning as OmniDocBench's extractor does: after
    a tag the scan resumes `step` characters past the tag's start, a closed span ends `step`
    characters past its closing tag's start, and when begins stay open the scan is redone
    from `restart` characters past the first open one."""
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    pos = 0
    while pos < len(text):
        b, e = begin.search(text, pos), end.search(text, pos)
        if b is None and e is None:
            break
        if b is not None and (e is None or b.start() < e.start()):
            opened.append(b.start())
            pos = b.start() + step
            continue
        if opened:
            start = opened.pop()
            if not opened:
                spans.append((start, e.start() + step))
        pos = e.start() + step
    if opened:
        offset = opened[0] + restart
        spans += [(s + offset, t + offset) for s, t in find_nested(text[offset:], begin, end, step, restart)]
    return spans


_HTML_BEGIN, _HTML_END = re.compile(r"<table(?:[^>]*)>"), re.compile(r"</table>")


def find_html_tables(text: str) -> list[tuple[int, int]]:
    """Outermost `<table ...>...</table>` spans."""
    return find_nested(text, _HTML_BEGIN, _HTML_END, step=len("</table>"), restart=len(_HTML_BEGIN.pattern))


def _soup(markup: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(markup, "html.parser")


def _simplify_tags(markup: str) -> str:
    """th -> td, thead and span unwrapped, MathML replaced by its `$alttext$`."""
    soup = _soup(markup)
    for th in soup.find_all("th"):
        th.name = "td"
    for thead in soup.find_all("thead"):
        thead.unwrap()
    for math in soup.find_all("math"):
        math.replace_with(f"${math.get('alttext', '')}$")
    for span in soup.find_all("span"):
        span.unwrap()
    return str(soup)


def normalize_table_html(markup: str) -> str:
    """The table as TEDS and the table edit distance see it: one `<table>` with cell
    markup only (no styling attributes, tbody, sup/sub/span/div/p), whitespace collapsed;
    empty when `markup` holds no table."""
    if "<table" not in markup.replace(" ", "").replace("'", '"'):
        return ""
    text = html.unescape(_simplify_tags(markup)).replace("\n", "")
    text = unicodedata.normalize("NFKC", text).strip()
    text = "".join(_TABLE_BODY.findall(text))
    for attr in _DROPPED_ATTRS:
        text = attr.sub("", text)
    text = re.sub(r"</?tbody>", "", text)
    text = re.sub(r"\s+", " ", text)
    text = _TABLE_WRAP[0] + text + _TABLE_WRAP[1]
    for tag in _DROPPED_TAGS:
        text = text.replace(tag, "")
    return _COLGROUP.sub("", text)


def cell_texts(markup: str) -> list[str]:
    """Texts of the cells that hold plain text only (how an unmatched predicted table
    joins the text pool)."""
    return [_CDOT.sub("", td.string).strip() for td in _soup(markup).find_all("td") if td.string]
