"""Random block contents: words, table HTML with merged cells, LaTeX formulas."""
from __future__ import annotations

import random
import string

WORDS = """the of and to in is for on that with as by this are from be at or an it which we
model data page table figure results method based using two each new time these first
value error test set layout text order image block region stream branch token decode
parse sample train fork tree depth speed cost graph draft verify accept batch cache
input output number section paper study system process level field area case point
form state work group change line left right top bottom small large high low mean rate
total result report range source index shape scale ratio step phase note list item""".split()
LETTERS = string.ascii_letters + string.digits


def word(rng: random.Random, mode: str) -> str:
    """A word from the lexicon (`words`), a random string (`random`), or either (`mixed`)."""
    if mode == "words" or (mode == "mixed" and rng.random() < 0.6):
        w = rng.choice(WORDS)
        return w.capitalize() if rng.random() < 0.1 else w
    if rng.random() < 0.3:
        return str(rng.randint(0, 9999))
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 8)))


def sentence(rng: random.Random, n_words: int, mode: str) -> str:
    text = " ".join(word(rng, mode) for _ in range(max(1, n_words)))
    return text + ("." if rng.random() < 0.7 else "")


def cell_text(rng: random.Random, mode: str) -> str:
    r = rng.random()
    if r < 0.45:
        return f"{rng.uniform(0, 100):.{rng.randint(0, 2)}f}"
    return word(rng, mode)[:6]


def table(rng: random.Random, rows: int, cols: int, merge_prob: float, mode: str) -> list[list[dict]]:
    """A grid of cells; each cell is {"text", "rowspan", "colspan"} or None where covered
    by a merged cell. Merges only in the first row (column groups) and first column."""
    grid: list[list[dict | None]] = [[{"text": cell_text(rng, mode), "rowspan": 1, "colspan": 1}
                                      for _ in range(cols)] for _ in range(rows)]
    if cols >= 3 and rng.random() < merge_prob:  # header cell spanning two columns
        c = rng.randrange(1, cols - 1)
        grid[0][c]["colspan"] = 2
        grid[0][c + 1] = None
    if rows >= 3 and rng.random() < merge_prob:  # first-column cell spanning two rows
        r = rng.randrange(1, rows - 1)
        grid[r][0]["rowspan"] = 2
        grid[r + 1][0] = None
    return grid


def table_html(grid: list[list[dict | None]]) -> str:
    out = ["<table>"]
    for row in grid:
        out.append("<tr>")
        for cell in row:
            if cell is None:
                continue
            attrs = "".join(f' {k}="{cell[k]}"' for k in ("colspan", "rowspan") if cell[k] > 1)
            out.append(f"<td{attrs}>{cell['text']}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


_VARS = list("xyzabcnkt")
_GREEK = [r"\alpha", r"\beta", r"\lambda", r"\mu", r"\sigma", r"\theta", r"\pi"]


def _atom(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.55:
        return rng.choice(_VARS)
    if r < 0.8:
        return str(rng.randint(1, 99))
    return rng.choice(_GREEK)


def _term(rng: random.Random, depth: int) -> str:
    r = rng.random()
    a = _atom(rng)
    if depth > 0 and r < 0.2:
        return r"\frac{" + _expr(rng, depth - 1) + "}{" + _expr(rng, depth - 1) + "}"
    if r < 0.4:
        return a + "^{" + _atom(rng) + "}"
    if r < 0.55:
        return a + "_{" + rng.choice(_VARS) + "}"
    if depth > 0 and r < 0.62:
        return r"\sqrt{" + _expr(rng, depth - 1) + "}"
    return a


def _expr(rng: random.Random, depth: int) -> str:
    terms = [_term(rng, depth) for _ in range(rng.randint(1, 3))]
    return "".join(t if i == 0 else rng.choice(["+", "-", " "]) + t for i, t in enumerate(terms)).replace("  ", " ")


def formula(rng: random.Random) -> str:
    lhs = _term(rng, 0)
    if rng.random() < 0.25:
        return lhs + r"=\sum_{i=1}^{n} " + _expr(rng, 1)
    return lhs + "=" + _expr(rng, 1)
