"""Oracle decoding depth, model-free: how many forward steps a page needs sequentially
(one stream, flat form) and under a strategy's decoding tree (its ground-truth graph),
and the page statistics that drive it (regions, content length by kind, columns, layout
prefix), for any data set with ground truth: synthetic pages and real ones alike."""
from __future__ import annotations

import numpy as np

from treedec.formats.contract import CHILD, FORK, block_layout
from treedec.page import Page
from treedec.strategies.base import Strategy

# Region kinds the statistics group categories into (what drives depth: long text, tables, formulas).
KINDS = {"text": ("text_block", "reference", "code_txt", "code_algorithm", "page_footnote", "abandon"),
         "title": ("title",), "table": ("table",), "formula": ("equation_isolated",),
         "caption": ("figure_caption", "table_caption", "equation_caption", "figure_footnote", "table_footnote",
                     "code_txt_caption", "code_algorithm_caption"),
         "figure": ("figure",), "furniture": ("header", "footer", "page_number")}
KIND_OF = {c: k for k, cats in KINDS.items() for c in cats}
BODY = ("text", "title", "table", "formula", "figure")


def page_depth(page: Page, strategy: Strategy) -> dict[str, float]:
    """Sequential depth l(B) + sum l(Y_k) (tokens of the flat form) and the strategy's
    depth (critical path of its tree; PaDoc: max_k(l(B<=k) + l(Y_k))), in tokens = steps."""
    tok = strategy.tokenizer
    fmt = strategy.format
    sequential = len(fmt.encode(tok, fmt.render(page)))
    fork = strategy.truth(page, [tok.image_id]).critical_path()
    return {"blocks": len(page.blocks), "sequential_depth": sequential, "fork_depth": fork,
            "reduction": 1 - fork / sequential if sequential else 0.0}


def columns(page: Page) -> int:
    """2 when body regions sit side by side (one wholly in the left 55 % of the page, one wholly
    in the right 55 %, overlapping vertically), else 1."""
    body = [b.bbox for b in page.blocks if KIND_OF.get(b.category) in BODY]
    left = [b for b in body if b[2] <= 0.55 * page.width]
    right = [b for b in body if b[0] >= 0.45 * page.width]
    return 2 if any(l[1] < r[3] and r[1] < l[3] for l in left for r in right if l is not r) else 1


def page_stats(page: Page, strategy: Strategy) -> dict:
    """Depth plus what drives it: regions, content tokens per region by kind (`tokens_<kind>`,
    a list per page), layout entry tokens per region, columns, shares of tables and formulas."""
    tok = strategy.tokenizer
    row = page_depth(page, strategy)
    per_kind: dict[str, list[int]] = {k: [] for k in KINDS}
    layout = []
    for b in page.reading_order():
        per_kind[KIND_OF.get(b.category, "text")].append(tok.count(b.content))
        layout.append(tok.count(block_layout(b, page.width, page.height) + FORK))
    n = len(page.blocks)
    content = sum(sum(v) for v in per_kind.values())
    row.update({"regions": n, "columns": columns(page), "layout_tokens": sum(layout),
                "layout_tokens_per_region": float(np.mean(layout)) if layout else 0.0,
                "table_share": len(per_kind["table"]) / n if n else 0.0,
                "formula_share": len(per_kind["formula"]) / n if n else 0.0,
                "table_token_share": sum(per_kind["table"]) / content if content else 0.0,
                "formula_token_share": sum(per_kind["formula"]) / content if content else 0.0,
                "branch_tokens": content + n * tok.count(CHILD), "content_tokens": content,
                "content_per_layout": content / sum(layout) if layout else 0.0})
    row.update({f"tokens_{k}": v for k, v in per_kind.items()})
    return row


def quartiles(values) -> list[float] | None:
    """[q1, median, q3] of `values`, or None when there are none."""
    values = list(values)
    return [float(v) for v in np.percentile(values, [25, 50, 75])] if values else None


PAGE_FIGURES = ("regions", "reduction", "sequential_depth", "fork_depth", "columns", "layout_tokens_per_region",
                "content_per_layout",
                "table_share", "formula_share", "table_token_share", "formula_token_share")


def summarize(rows: list[dict]) -> dict[str, list[float] | None]:
    """Quartiles over pages of each page figure, and over regions of content tokens per kind
    (`tokens_<kind>`, every region of that kind on every page)."""
    out = {k: quartiles(r[k] for r in rows) for k in PAGE_FIGURES}
    for k in KINDS:
        out[f"tokens_{k}"] = quartiles(v for r in rows for v in r[f"tokens_{k}"])
        out[f"regions_{k}"] = quartiles(len(r[f"tokens_{k}"]) for r in rows)
    out["two_column_share"] = [float(np.mean([r["columns"] == 2 for r in rows]))] * 3 if rows else None
    return out


def stats_table(summaries: dict[str, dict], title: str):
    """A rich table: one row per figure, one column (median [q1-q3]) per named summary."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column("figure")
    for name in summaries:
        t.add_column(f"{name}: median [IQR]")
    keys = list(next(iter(summaries.values())))
    for k in keys:
        cells = []
        for s in summaries.values():
            q = s.get(k)
            fmt = "{:.2f}" if any(w in k for w in ("share", "reduction", "_per_")) else "{:.0f}"
            cells.append("-" if q is None else f"{fmt.format(q[1])} [{fmt.format(q[0])}-{fmt.format(q[2])}]")
        t.add_row(k, *cells)
    return t
