"""`python -m treedec evaluate pred=DIR gt=FILE [format=NAME]`: score predicted pages (one Markdown or
OmniDocBench/treedec JSON per page, named by image stem; with `format`, one raw model output per
page in that output format) against OmniDocBench ground truth."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from treedec.errors import UserError
from treedec.io import load_omnidocbench
from treedec.metrics import OVERALL_NOTE
from treedec.report.html import write_report
from treedec.report.plots import histogram, per_page_bars
from treedec.results.evaluate import evaluate_pages, load_predictions, load_raw_predictions
from treedec.run.outputs import RunOutput

PAGE_COLUMNS = {"text_edit": "text", "formula_edit": "formula", "table_teds": "TEDS", "table_teds_s": "TEDS-S",
                "reading_order_edit": "order", "layout_f1": "layout"}
SUMMARY_KEYS = ("text_edit", "text_edit_all", "formula_edit", "formula_edit_all", "table_teds", "table_teds_s",
                "table_edit", "reading_order_edit", "layout_f1", "overall")


def _fmt(value: Any, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _page_table(per_page: dict[str, dict]) -> Table:
    t = Table(title=f"Per page ({len(per_page)}): edit distances (lower is better), TEDS (higher)")
    t.add_column("page", no_wrap=True, overflow="ellipsis", max_width=24)
    for header in PAGE_COLUMNS.values():
        t.add_column(header, justify="right", no_wrap=True)
    for name, fig in per_page.items():
        t.add_row(name, *(_fmt(fig.get(c), 3) for c in PAGE_COLUMNS))
    return t


def _summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title=f"Overall, {summary['pages']} pages ({summary['pages_flagged']} flagged)")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for k in SUMMARY_KEYS:
        t.add_row(k, _fmt(summary.get(k)))
    return t


def _load_ground_truth(gt: Path) -> list:
    if not gt.is_file():
        raise UserError(f"gt={gt}: no such file (expected OmniDocBench JSON)")
    try:
        return load_omnidocbench(gt)
    except Exception as e:  # any reading problem is the user's file
        raise UserError(f"gt={gt}: not OmniDocBench JSON ({type(e).__name__}: {e})") from None


def _quality(fig: dict[str, Any]) -> dict[str, float | None]:
    """Per-page quality, higher is better: 1 - edit distances, TEDS."""
    def inverse(v: float | None) -> float | None:
        return None if v is None else 1 - v

    return {"text (1 - edit)": inverse(fig["text_edit"]), "tables (TEDS)": fig["table_teds"],
            "formulas (1 - edit)": inverse(fig["formula_edit"]), "order (1 - edit)": inverse(fig["reading_order_edit"])}


def _plots(out: Path, per_page: dict[str, dict]) -> list[Path]:
    quality = {name: _quality(fig) for name, fig in per_page.items()}
    return [per_page_bars(quality, list(next(iter(quality.values()), {})), out / "quality_by_page.png",
                          "Quality by page (higher is better)"),
            histogram([f["text_edit"] for f in per_page.values()], out / "text_edit_hist.png",
                      "Text edit distance per page", "normalized edit distance (lower is better)")]


def main(cfg, out: RunOutput) -> dict[str, Any]:
    """The CLI entry: `python -m treedec evaluate pred=DIR gt=FILE [format=NAME]`."""
    return evaluate_dir(cfg.pred, cfg.gt, out, cfg.get("format"))


def evaluate_dir(pred: str | Path, gt: str | Path, out: str | Path | RunOutput, fmt: str | None = None) -> dict[str, Any]:
    """Score, print, and write `summary.json`, `pages/<name>.json`, plots and `report.html`
    into `out`; return the summary. `fmt`: the predictions are raw outputs in that format (one
    file per page), read by it (`treedec.formats`); None: Markdown or OmniDocBench JSON files."""
    pred_dir = Path(pred)
    if not pred_dir.is_dir():
        raise UserError(f"pred={pred}: no such folder (expected one .md or .json per page)")
    gts = _load_ground_truth(Path(gt))
    if fmt:
        from treedec.formats import get_format

        preds, flags = load_raw_predictions(pred_dir, gts, get_format(fmt))
    else:
        preds, flags = load_predictions(pred_dir, gts)
    result = evaluate_pages(preds, gts, flags, progress=True)
    run = out if isinstance(out, RunOutput) else RunOutput(out)
    for name, figures in result["per_page"].items():
        run.page(name, figures)
    console = Console()
    console.print(_page_table(result["per_page"]))
    for name, fig in result["per_page"].items():
        for flag in fig["flags"]:
            console.print(f"[yellow]{name}[/yellow]: {flag}", highlight=False)
    console.print(_summary_table(result))
    console.print(f"[dim]{OVERALL_NOTE}[/dim]")
    summary = run.summary({**result, "pred": str(pred_dir), "gt": str(gt), "format": fmt}, "evaluate")
    write_report(run.dir, summary, result["per_page"], _plots(run.dir, result["per_page"]),
                 title=f"treedec evaluate: {pred_dir.name}")
    return summary
