"""Seeded synthetic pages with exact ground truth.

Layout works on a grid of glyph cells (`cell` pixels each): text is drawn one
character per cell, so a small ViT whose patches align with the grid sees one glyph
per patch. Regions flow top to bottom through one or two columns: titles,
paragraphs, tables (some with merged cells), display formulas (matplotlib mathtext),
figures with captions, plus header, footer and page number.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw

from treedec.data.sample import Sample
from treedec.data.synth import content as C
from treedec.data.synth.presets import PRESETS
from treedec.data.synth.render import draw_figure, draw_text_line, formula_image
from treedec.page import Block, Page


@dataclass
class SynthConfig:
    width: int = 384  # page size in pixels
    height: int = 512
    cell: tuple[int, int] = (8, 16)  # glyph cell (w, h) in pixels
    margin: int = 2  # in cells
    regions: tuple[int, int] = (3, 8)  # body regions per page (min, max), space permitting
    columns: str = "mixed"  # one | two | mixed
    two_column_prob: float = 0.5  # columns=mixed: the chance of a two-column page
    text_mode: str = "mixed"  # words | random | mixed
    para_words: tuple[int, int] = (3, 24)
    title_words: tuple[int, int] = (2, 6)
    caption_words: tuple[int, int] = (1, 5)  # after "Figure n: " (table captions: up to one fewer); 0: the label alone
    wrap: str = "word"  # word: break lines between words | hard: fill every line, break anywhere
    kinds: dict[str, float] = field(default_factory=lambda: {
        "text_block": 0.55, "title": 0.15, "table": 0.12, "equation_isolated": 0.1, "figure": 0.08})
    table_rows: tuple[int, int] = (2, 4)
    table_cols: tuple[int, int] = (2, 4)
    merge_prob: float = 0.3
    furniture_prob: float = 0.5  # chance of each of header, footer, page number
    # a rule in the blank row under the page header, as running heads often have: without it a
    # one-row text block at the top of the body is drawn exactly like a header, and no reader can
    # tell the two apart (false: the pages before this knob existed)
    header_rule: bool = True
    # the same at the foot: a rule in the blank row above the footer / page number row; without it
    # a short one-row text block on the last row is drawn exactly like a footer
    footer_rule: bool = True
    noise: float = 0.0  # std of additive pixel noise, in [0, 1]
    # the named preset (treedec.data.synth.presets) these knobs started from; informative only,
    # `synth_config` applies it (None: the defaults above, preset `base`)
    preset: str | None = None

    def __post_init__(self):
        for name in ("cell", "regions", "para_words", "title_words", "caption_words", "table_rows", "table_cols"):
            setattr(self, name, tuple(getattr(self, name)))
        if self.columns not in ("one", "two", "mixed"):
            raise ValueError(f"columns must be one, two or mixed, got {self.columns!r}")
        if self.wrap not in ("word", "hard"):
            raise ValueError(f"wrap must be word or hard, got {self.wrap!r}")
        if self.text_mode not in ("words", "random", "mixed"):
            raise ValueError(f"text_mode must be words, random or mixed, got {self.text_mode!r}")
        cols = self.width // self.cell[0] - 2 * self.margin
        rows = self.height // self.cell[1] - 2 * self.margin
        if cols < 6 or rows < 3:
            raise ValueError(f"page {self.width}x{self.height} holds only {cols}x{rows} glyph cells inside the margins; "
                             "make it larger or the cell smaller")
        if not 0 <= self.two_column_prob <= 1:
            raise ValueError(f"two_column_prob is a probability, got {self.two_column_prob}")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        unknown = set(self.kinds) - {"text_block", "title", "table", "equation_isolated", "figure"}
        if unknown:
            raise ValueError(f"unknown region kinds {sorted(unknown)}")


def synth_config(knobs: dict | None = None, base: dict | None = None) -> SynthConfig:
    """The SynthConfig of `knobs`: the other knobs over their named `preset` when they name
    one, else over `base` (e.g. the page distribution a model was trained on), over
    SynthConfig's defaults."""
    knobs = dict(knobs or {})
    base = dict(base or {})
    preset = knobs.get("preset")
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    merged = {**PRESETS[preset], **knobs} if preset else {**base, **knobs}
    return SynthConfig(**merged)


@dataclass
class SynthSample(Sample):
    """A generated page: its ground truth and (unless rendering was skipped) its image. `cells`
    maps a block's index to the glyph cell (row, col) of each character of its content
    (None for a character not drawn on the grid, e.g. the space a line break replaced);
    only blocks drawn as grid text have an entry (a training signal for grounding)."""
    cells: dict[int, list[tuple[int, int] | None]] = field(default_factory=dict)


def _hard_wrap(text: str, width: int) -> list[str]:
    return [text[i:i + width] for i in range(0, len(text), width)] or [""]


def _wrap(text: str, width: int) -> list[str]:
    lines, cur = [], ""
    for w in text.split(" "):
        while len(w) > width:  # a word longer than the line is cut
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(w[:width])
            w = w[width:]
        if not cur:
            cur = w
        elif len(cur) + 1 + len(w) <= width:
            cur += " " + w
        else:
            lines.append(cur)
            cur = w
    if cur:
        lines.append(cur)
    return lines


class _Canvas:
    def __init__(self, cfg: SynthConfig, render: bool):
        self.cfg = cfg
        self.cw, self.ch = cfg.cell
        self.img = Image.new("L", (cfg.width, cfg.height), 255) if render else None
        self.draw = ImageDraw.Draw(self.img) if render else None
        self.blocks: list[Block] = []
        self.cells: dict[int, list[tuple[int, int] | None]] = {}

    def add(self, category: str, box: tuple[float, float, float, float], content: str) -> None:
        self.blocks.append(Block(category=category, bbox=box, content=content, order=len(self.blocks) + 1))

    def rule(self, row: int) -> None:
        """A 1-px line across the body's width through the middle of `row` (a blank row)."""
        if self.draw:
            m, y = self.cfg.margin, row * self.ch + self.ch // 2
            self.draw.line((m * self.cw, y, (self.cfg.width // self.cw - m) * self.cw - 1, y), fill=0, width=1)

    def text(self, category: str, col: int, row: int, lines: list[str], bold: bool = False) -> None:
        if self.draw:
            for i, line in enumerate(lines):
                draw_text_line(self.draw, col * self.cw, (row + i) * self.ch, line, self.cfg.cell, bold)
        width = max(len(l) for l in lines)
        box = (col * self.cw, row * self.ch, (col + width) * self.cw, (row + len(lines)) * self.ch)
        joiner = "" if self.cfg.wrap == "hard" else " "
        cells: list[tuple[int, int] | None] = []
        for i, line in enumerate(lines):
            if i and joiner:
                cells.append(None)
            cells += [(row + i, col + j) for j in range(len(line))]
        self.cells[len(self.blocks)] = cells
        self.add(category, box, joiner.join(lines))


def _table_size(grid, cw: int, ch: int) -> tuple[list[int], int]:
    cols = len(grid[0])
    widths = [1] * cols
    for row in grid:
        for j, cell in enumerate(row):
            if cell is not None and cell["colspan"] == 1:
                widths[j] = max(widths[j], len(cell["text"]) + 1)
    return [w * cw for w in widths], ch + ch // 2


def _draw_table(cv: _Canvas, grid, x: int, y: int, col_px: list[int], row_px: int) -> tuple[int, int, int, int]:
    xs = [x]
    for w in col_px:
        xs.append(xs[-1] + w)
    rows = len(grid)
    x2, y2 = xs[-1], y + rows * row_px
    if cv.draw:
        d = cv.draw
        d.rectangle((x, y, x2, y2), outline=0, width=1)
        for i, row in enumerate(grid):
            for j, cell in enumerate(row):
                if cell is None:
                    continue
                cx1, cy1 = xs[j], y + i * row_px
                cx2, cy2 = xs[j + cell["colspan"]], cy1 + cell["rowspan"] * row_px
                d.rectangle((cx1, cy1, cx2, cy2), outline=0, width=1)
                draw_text_line(d, cx1 + cv.cw // 2, cy1 + (cell["rowspan"] * row_px - cv.ch) // 2, cell["text"], cv.cfg.cell)
    return (x, y, x2 + 1, y2 + 1)


def synth_name(seed: int) -> str:
    """The name of the synthetic page made from `seed`."""
    return f"synth_{seed:07d}"


def generate_page(seed: int, cfg: SynthConfig | None = None, render: bool = True) -> SynthSample:
    """The page for `seed` (same seed and config -> same page and pixels): furniture, columns,
    body regions top to bottom, the foot, then the pixels."""
    cfg = cfg or SynthConfig()
    rng = random.Random(seed)
    cv = _Canvas(cfg, render)
    furniture = {k: rng.random() < cfg.furniture_prob for k in ("header", "footer", "page_number")}
    top, bottom = _head(cv, rng, furniture)
    columns, top = _columns(cv, rng, top)
    _body(cv, rng, columns, top, bottom)
    _foot(cv, rng, furniture)
    name = synth_name(seed)
    page = Page(width=cfg.width, height=cfg.height, blocks=cv.blocks, image_path=name + ".png",
                info={"data_source": "synthetic", "seed": seed})
    return SynthSample(name, page, _pixels(cv, seed) if render else None, cells=cv.cells)


def _head(cv: _Canvas, rng: random.Random, furniture: dict[str, bool]) -> tuple[int, int]:
    """The header (with its rule) when the page has one, and room left for the foot: the body's
    rows [top, bottom)."""
    cfg, m = cv.cfg, cv.cfg.margin
    ncols, nrows = cfg.width // cv.cw, cfg.height // cv.ch
    top, bottom = m, nrows - m
    if furniture["header"]:
        cv.text("header", m, top, [C.sentence(rng, rng.randint(2, 4), cfg.text_mode)[: ncols - 2 * m]])
        if cfg.header_rule:
            cv.rule(top + 1)
        top += 2
    if furniture["footer"] or furniture["page_number"]:
        bottom -= 2
        if cfg.footer_rule:
            cv.rule(bottom)  # the blank row between the body and the foot
    return top, bottom


def _columns(cv: _Canvas, rng: random.Random, top: int) -> tuple[list[tuple[int, int]], int]:
    """The body's columns (first cell, width in cells): one, or two (sometimes under a full-width
    title); and the body's first row after that title."""
    cfg, m = cv.cfg, cv.cfg.margin
    two = cfg.columns == "two" or (cfg.columns == "mixed" and rng.random() < cfg.two_column_prob)
    span = cfg.width // cv.cw - 2 * m
    if not (two and span >= 30):
        return [(m, span)], top
    gap = 2
    colw = (span - gap) // 2
    if rng.random() < 0.5:  # a full-width title above the columns
        title = C.sentence(rng, rng.randint(2, 5), cfg.text_mode).rstrip(".")
        lines = _wrap(title, span)[:2]
        cv.text("title", m, top, lines, bold=True)
        top += len(lines) + 1
    return [(m, colw), (m + colw + gap, colw)], top


def _body(cv: _Canvas, rng: random.Random, columns: list[tuple[int, int]], top: int, bottom: int) -> None:
    """Regions of random kinds down each column in turn: a kind that does not fit is drawn again,
    up to 4 misses, then the next column; until the page's number of regions is placed."""
    cfg = cv.cfg
    n_regions = rng.randint(*cfg.regions)
    kinds, weights = zip(*cfg.kinds.items())
    col_i, row, placed, misses = 0, top, 0, 0
    numbers = {"table": 0, "figure": 0}  # tables and figures placed: their captions' numbers
    while placed < n_regions and col_i < len(columns):
        x0, width = columns[col_i]
        kind = rng.choices(kinds, weights)[0]
        height = _place(cv, rng, kind, x0, row, width, bottom - row, numbers.get(kind, 0) + 1)
        if height is None:
            misses += 1
            if misses < 4:
                continue
            misses, col_i, row = 0, col_i + 1, top
            continue
        misses = 0
        if kind in numbers:
            numbers[kind] += 1
        row += height + 1
        placed += 1


def _foot(cv: _Canvas, rng: random.Random, furniture: dict[str, bool]) -> None:
    """The footer and the page number, on the last row inside the margin."""
    cfg, m = cv.cfg, cv.cfg.margin
    ncols, foot_row = cfg.width // cv.cw, cfg.height // cv.ch - m - 1
    if furniture["footer"]:
        cv.text("footer", m, foot_row, [C.sentence(rng, rng.randint(2, 3), cfg.text_mode)[: (ncols - 2 * m) // 2]])
    if furniture["page_number"]:
        num = str(rng.randint(1, 300))
        cv.text("page_number", ncols - m - len(num), foot_row, [num])


def _pixels(cv: _Canvas, seed: int) -> Image.Image:
    """The drawn page in RGB, with the config's pixel noise (its own generator, from `seed`)."""
    image = cv.img
    if cv.cfg.noise > 0:
        arr = np.asarray(image, dtype=np.float32) / 255.0
        arr += np.random.default_rng(seed).normal(0, cv.cfg.noise, arr.shape)
        image = Image.fromarray((np.clip(arr, 0, 1) * 255).astype(np.uint8))
    return image.convert("RGB")


def _caption(rng: random.Random, cfg: SynthConfig, label: str, words: int) -> str:
    """`label: some words` (the label alone for no words)."""
    return f"{label}: " + C.sentence(rng, words, cfg.text_mode) if words else label


def _place(cv: _Canvas, rng: random.Random, kind: str, x0: int, row: int, width: int, room: int,
           number: int) -> int | None:
    """Place one region of `kind` at (x0, row) within `width` x `room` cells (`number`: a table's
    or figure's in its caption); its height in rows, or None where it does not fit."""
    if kind not in _PLACE:
        raise ValueError(f"unknown region kind {kind!r}")
    return _PLACE[kind](cv, rng, kind, x0, row, width, room, number)


def _place_text(cv: _Canvas, rng: random.Random, kind: str, x0: int, row: int, width: int, room: int,
                number: int) -> int | None:
    """A paragraph or a title, wrapped to `width` and cut to `room` lines."""
    cfg = cv.cfg
    n = rng.randint(*(cfg.para_words if kind == "text_block" else cfg.title_words))
    text = C.sentence(rng, n, cfg.text_mode)
    if kind == "title":
        text = text.rstrip(".").capitalize()
    lines = (_hard_wrap if cfg.wrap == "hard" else _wrap)(text, width)[:room]
    if not lines or room < 1:
        return None
    cv.text(kind, x0, row, lines, bold=kind == "title")
    return len(lines)


def _place_formula(cv: _Canvas, rng: random.Random, kind: str, x0: int, row: int, width: int, room: int,
                   number: int) -> int | None:
    """A display formula two rows high, centred, shrunk to `width` where wider."""
    if room < 3:
        return None
    cw, ch = cv.cfg.cell
    latex = C.formula(rng)
    fh = 2 * ch
    img = formula_image(latex, fh)  # rendered even without drawing: its size is the box
    if img.width > width * cw:
        img = img.resize((width * cw, max(1, round(img.height * width * cw / img.width))))
    x = x0 * cw + (width * cw - img.width) // 2
    y = row * ch + (fh - img.height) // 2
    if cv.draw:
        cv.img.paste(img, (x, y))
    cv.add("equation_isolated", (x, y, x + img.width, y + img.height), latex)
    return 2


def _place_table(cv: _Canvas, rng: random.Random, kind: str, x0: int, row: int, width: int, room: int,
                 number: int) -> int | None:
    """A caption line, then a ruled table (some cells merged)."""
    cfg = cv.cfg
    cw, ch = cfg.cell
    grid = C.table(rng, rng.randint(*cfg.table_rows), rng.randint(*cfg.table_cols), cfg.merge_prob, cfg.text_mode)
    col_px, row_px = _table_size(grid, cw, ch)
    rows_needed = 2 + -(-(len(grid) * row_px + 2) // ch)  # caption line + gap + table
    if sum(col_px) + 1 > width * cw or rows_needed > room:
        return None
    lo, hi = cfg.caption_words
    caption = _caption(rng, cfg, f"Table {number}", rng.randint(lo, max(lo, hi - 1)))
    cv.text("table_caption", x0, row, _wrap(caption, width)[:1])
    box = _draw_table(cv, grid, x0 * cw, (row + 1) * ch + ch // 2, col_px, row_px)
    cv.add("table", box, C.table_html(grid))
    return rows_needed


def _place_figure(cv: _Canvas, rng: random.Random, kind: str, x0: int, row: int, width: int, room: int,
                  number: int) -> int | None:
    """A figure 3 to 6 rows high, centred, its caption line under it."""
    cfg = cv.cfg
    cw, ch = cfg.cell
    fig_rows = rng.randint(3, 6)
    if fig_rows + 2 > room:
        return None
    fw = rng.randint(max(4, width // 2), width)
    fx = x0 + (width - fw) // 2
    box = (fx * cw, row * ch, (fx + fw) * cw, (row + fig_rows) * ch)
    if cv.draw:  # its own generator: the ground truth must not depend on drawing
        draw_figure(cv.draw, box, random.Random(rng.random()))
    else:
        rng.random()
    cv.add("figure", box, "")
    caption = _caption(rng, cfg, f"Figure {number}", rng.randint(*cfg.caption_words))
    cv.text("figure_caption", x0, row + fig_rows, _wrap(caption, width)[:1])
    return fig_rows + 1


_PLACE = {"text_block": _place_text, "title": _place_text, "equation_isolated": _place_formula,
          "table": _place_table, "figure": _place_figure}
