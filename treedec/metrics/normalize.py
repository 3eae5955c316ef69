"""Text and formula normalization before edit distances, as OmniDocBench defines it.

Text: inline LaTeX that uses `\\`, `^` or `_` is rendered to Unicode, then everything but
word characters (letters, digits, `_`, CJK) is dropped. Formulas: delimiters, `\\tag`,
`\\begin/\\end`, font and spacing commands and all spaces are removed, then lower-cased.
"""
from __future__ import annotations

import logging
import re
from functools import lru_cache

_INLINE_MATH = re.compile(r"\$(.*?)\$|\\\((.*?)\\\)")
_ESCAPED_PAIR = re.compile(r"\\([\\_&%^])")
_NON_WORD = re.compile(r"[^\w\u4e00-\u9fff]")
_LITERAL_WHITESPACE = ("\\t", "\\n", "\t", "\n", "/t", "/n")

_DISPLAY_BODY = re.compile(r"\\\[(.+?)(?<!\\)\\\]")
_FORMULA_DROPS = (re.compile(r"\\tag\{.*?\}"), re.compile(r"\\hspace\{.*?\}"), re.compile(r"\\begin\{.*?\}"),
                  re.compile(r"\\end\{.*?\}"), re.compile(r"\\arraycolsep.*?\}"))
# Removed in this order, as plain substrings (so `\mathbfcal` loses `\mathbf` first).
_FORMULA_TOKENS = (
    "\\mathbf", "\\mathrm", "\\mathnormal", "\\mathit", "\\mathbb", "\\mathcal", "\\mathscr", "\\mathfrak",
    "\\mathsf", "\\mathtt", "\\textbf", "\\text", "\\boldmath", "\\boldsymbol", "\\operatorname", "\\bm",
    "\\symbfit", "\\mathbfcal", "\\symbf", "\\scriptscriptstyle", "\\notag", "\\setlength", "\\coloneqq",
    "\\space", "\\thickspace", "\\thinspace", "\\medspace", "\\nobreakspace", "\\negmedspace", "\\quad",
    "\\qquad", "\\enspace", "\\substackw", " ", "$$", "\\left", "\\right", "\\displaystyle",
)


@lru_cache(maxsize=1)
def _latex_renderer():
    from pylatexenc.latex2text import LatexNodes2Text

    logging.getLogger("pylatexenc").setLevel(logging.ERROR)  # its parse warnings go to stderr otherwise
    return LatexNodes2Text()


def latex_to_unicode(latex: str) -> str:
    """LaTeX rendered as plain Unicode text (pylatexenc)."""
    if latex.endswith("\\"):
        latex += " "  # pylatexenc 3.0a30 may never return on a trailing backslash
    return _latex_renderer().latex_to_text(latex)


def inline_math_to_unicode(text: str) -> str:
    """Replace each `$...$` / `\\(...\\)` that holds `\\`, `^` or `_` (after dropping escaped
    pairs such as `\\_`) by its Unicode rendering; other inline math is left as written."""
    replacements = []
    for m in _INLINE_MATH.finditer(text):
        body = m.group(1) if m.group(1) is not None else m.group(2)
        body = _ESCAPED_PAIR.sub("", body)
        if not any(c in body for c in "\\^_"):
            continue
        try:
            replacements.append((m.start(), m.end(), latex_to_unicode(body).strip()))
        except Exception:  # pylatexenc rejects some input; such math stays as written
            continue
    for start, end, rendered in reversed(replacements):
        text = text[:start] + rendered + text[end:]
    return text


def keep_word_chars(text: str) -> str:
    """Drop whitespace escapes and every character that is not a word character or CJK."""
    for w in _LITERAL_WHITESPACE:
        text = text.replace(w, "")
    return _NON_WORD.sub("", text)


def normalize_text(text: str) -> str:
    """The form text blocks are compared in."""
    return keep_word_chars(inline_math_to_unicode(text))


def normalize_formula(latex: str) -> str:
    """The form display formulas are compared in."""
    text = latex.strip().strip("$").strip("\n")
    m = _DISPLAY_BODY.search(text)
    if m:
        text = m.group(1).strip()
    for pattern in _FORMULA_DROPS:
        text = pattern.sub("", text)
    text = text.strip(".")
    for token in _FORMULA_TOKENS:
        text = text.replace(token, "")
    return text.lower()
