"""A self-contained `report.html`: summary figures, per-page rows, embedded PNG plots."""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Mapping, Sequence

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}.flag{color:#b00;text-align:left}img{max-width:100%;margin:1em 0}"""


def _cell(value: Any) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return f"{value:.4f}"
    return html.escape(str(value))


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (int, float, str))


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
    return f"<table><tr><th>figure</th><th>value</th></tr>{rows}</table>"


def _page_table(per_page: Mapping[str, Mapping[str, Any]]) -> str:
    columns = [k for k in dict.fromkeys(k for fig in per_page.values() for k, v in fig.items()
                                        if k != "flags" and (v is None or isinstance(v, (int, float))))]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["page", *columns, "flags"])
    rows = []
    for name, fig in per_page.items():
        cells = "".join(f"<td>{_cell(fig.get(c))}</td>" for c in columns)
        flags = html.escape("; ".join(fig.get("flags", [])))
        rows.append(f"<tr><td>{html.escape(name)}</td>{cells}<td class='flag'>{flags}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A list of flat records (e.g. `by_concurrency`) as one table, columns in first-seen order."""
    columns = list(dict.fromkeys(k for r in rows for k, v in r.items() if _is_scalar(v)))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _image(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<img alt='{html.escape(Path(path).name)}' src='data:image/png;base64,{data}'>"


def write_report(out_dir: str | Path, summary: Mapping[str, Any], per_page: Mapping[str, Mapping[str, Any]],
                 plots: Sequence[Path], title: str = "treedec report",
                 tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, notes: Sequence[str] = ()) -> Path:
    """Write `out_dir/report.html` (no external files: plots are embedded) and return its path.
    `tables`: titled lists of records (e.g. `by_concurrency`), after the summary; `notes`:
    one-line remarks under the plots. The pages section is left out when `per_page` is empty."""
    body = [f"<h1>{html.escape(title)}</h1>", "<h2>Summary</h2>", _summary_table(summary)]
    for name, rows in (tables or {}).items():
        if rows:
            body += [f"<h2>{html.escape(name)}</h2>", _rows_table(rows)]
    if plots or notes:
        body += ["<h2>Plots</h2>", *(_image(p) for p in plots), *(f"<p>{html.escape(n)}</p>" for n in notes)]
    if per_page:
        body += [f"<h2>Pages ({len(per_page)})</h2>", _page_table(per_page)]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>")
    path = Path(out_dir) / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
