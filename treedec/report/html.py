"""A self-contained `report.html`: the strategy beside its baseline first, then plots,
tables, a look at pages (image with predicted regions, Markdown beside), per-page rows,
and every figure of summary.json last."""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Mapping, Sequence

from treedec.report.lead import LeadRow, Mark, PageView, lead_table

_STYLE = """body{font-family:sans-serif;margin:2em auto;padding:0 2em;max-width:1200px}
table{border-collapse:collapse;margin:0}.scroll{overflow-x:auto;max-width:100%;margin:1em 0}
.scroll.tall{max-height:36em;overflow-y:auto}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}.flag{color:#b00;text-align:left}img{max-width:100%;margin:1em 0}
.alert{background:#fff4d6;border:1px solid #e0b000;padding:.6em 1em;overflow-wrap:anywhere}
.view{display:flex;gap:1.5em;align-items:flex-start;border-top:1px solid #ddd;padding:.8em 0}
.view figure{margin:0;flex:0 1 auto;max-width:50%}.view img{margin:0;border:1px solid #ccc}
.view>div{flex:1;min-width:0}.view pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;background:#fafafa;
padding:.6em;max-height:720px;overflow:auto;margin:0}p{overflow-wrap:anywhere}
table.lead td{font-size:14px}.better{color:#067d17;font-weight:bold}.worse{color:#b3261e;font-weight:bold}
.same{color:#555}"""


def _cell(value: Any) -> str:
    if isinstance(value, Mark):
        return f"<span class='{value.cls}'>{html.escape(value.text)}</span>" if value.cls else html.escape(value.text)
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return f"{value:.4f}"
    return html.escape(str(value))


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (int, float, str, Mark))


def boxed(table: str, tall: bool = False) -> str:
    """A table in its own box: a table wider than the page scrolls there, not the page."""
    return f"<div class='scroll{' tall' if tall else ''}'>{table}</div>"


def _scalars(summary: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Scalar figures, with one level of nested dicts flattened as `key.sub`."""
    out = []
    for k, v in summary.items():
        if _is_scalar(v):
            out.append((k, v))
        elif isinstance(v, Mapping):
            out += [(f"{k}.{sub}", x) for sub, x in v.items() if _is_scalar(x)]
    return out


def _summary_table(summary: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{_cell(v)}</td></tr>" for k, v in _scalars(summary))
    return boxed(f"<table><tr><th>figure</th><th>value</th></tr>{rows}</table>")


def _page_table(per_page: Mapping[str, Mapping[str, Any]]) -> str:
    columns = [k for k in dict.fromkeys(k for fig in per_page.values() for k, v in fig.items()
                                        if k != "flags" and (v is None or isinstance(v, (int, float))))]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["page", *columns, "flags"])
    rows = []
    for name, fig in per_page.items():
        cells = "".join(f"<td>{_cell(fig.get(c))}</td>" for c in columns)
        flags = html.escape("; ".join(fig.get("flags", [])))
        rows.append(f"<tr><td>{html.escape(name)}</td>{cells}<td class='flag'>{flags}</td></tr>")
    return boxed(f"<table><tr>{head}</tr>{''.join(rows)}</table>", tall=len(rows) > 30)


def _rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A list of flat records (e.g. `by_concurrency`) as one table, columns in first-seen order."""
    columns = list(dict.fromkeys(k for r in rows for k, v in r.items() if _is_scalar(v)))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return boxed(f"<table><tr>{head}</tr>{body}</table>")


def _image(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<img alt='{html.escape(Path(path).name)}' src='data:image/png;base64,{data}'>"


def _views(views: Sequence[PageView], total: int) -> str:
    more = f" (the first {len(views)} of {total})" if total > len(views) else ""
    out = [f"<h2>Pages as parsed{more}</h2>",
           "<p>Predicted regions drawn on each page, coloured by the branch (stream) that decoded them; one colour: "
           "the page was decoded as one stream. The page's Markdown beside it.</p>"]
    for v in views:
        flags = f"<p class='flag'>{html.escape('; '.join(v.flags))}</p>" if v.flags else ""
        img = (f"<img alt='{html.escape(v.name)}' src='data:image/jpeg;base64,{v.jpeg_b64}'>" if v.jpeg_b64
               else "<p class='flag'>no image</p>")
        out.append(f"<div class='view' id='page-{html.escape(v.name)}'><figure>{img}<figcaption>{html.escape(v.name)}"
                   f"</figcaption></figure><div>{flags}<pre>{html.escape(v.markdown) or '(empty)'}</pre>"
                   "</div></div>")
    return "".join(out)


def write_report(out_dir: str | Path, summary: Mapping[str, Any], per_page: Mapping[str, Mapping[str, Any]],
                 plots: Sequence[Path], title: str = "treedec report",
                 tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, notes: Sequence[str] = (),
                 lead: Sequence[LeadRow] = (), lead_names: tuple[str, str | None] = ("", None),
                 alerts: Sequence[str] = (), views: Sequence[PageView] = (), lead_notes: Sequence[str] = (),
                 lead_tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Path:
    """Write `out_dir/report.html` (no external files: plots and pages are embedded) and
    return its path. `alerts`: boxed remarks at the top; `lead`: the strategy beside its
    baseline (`lead_names`), first, with `lead_notes` and `lead_tables` under it; `tables`: titled lists of records (e.g.
    `by_concurrency`) after the plots; `notes`: one-line remarks under the plots; `views`:
    pages drawn with their regions and Markdown. The pages section is left out when
    `per_page` is empty; every scalar of `summary` comes last."""
    body = [f"<h1>{html.escape(title)}</h1>", *(f"<p class='alert'>{html.escape(a)}</p>" for a in alerts)]
    if lead:
        body += [lead_table(lead, *lead_names), *(f"<p>{html.escape(n)}</p>" for n in lead_notes)]
    for name, rows in (lead_tables or {}).items():
        if rows:
            body += [f"<h3>{html.escape(name)}</h3>", _rows_table(rows)]
    if plots or notes:
        body += ["<h2>Plots</h2>", *(_image(p) for p in plots), *(f"<p>{html.escape(n)}</p>" for n in notes)]
    for name, rows in (tables or {}).items():
        if rows:
            body += [f"<h2>{html.escape(name)}</h2>", _rows_table(rows)]
    if views:
        body += [_views(views, len(per_page) or len(views))]
    if per_page:
        body += [f"<h2>Pages ({len(per_page)})</h2>", _page_table(per_page)]
    body += ["<h2>All figures (summary.json)</h2>", _summary_table(summary)]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>")
    path = Path(out_dir) / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
