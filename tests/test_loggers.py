"""Loggers: what a command wrote goes to metrics.jsonl (scalars) and to W&B (scalars, plots,
tables, report.html); the report's tables and notes."""
import json

import pytest

from test_metrics_command import case  # noqa: F401  (the evaluate fixture)
from treedec.commands.evaluate import evaluate_dir
from treedec.report.html import write_report
from treedec.report.loggers import log_outputs, make_logger, page_rows, summary_scalars
from treedec.report.plots import concurrency_curves

ROWS = [{"concurrency": c, "strategy": s, "pages_per_s": c * k, "p95_latency_s": 1 / (c * k), "throughput_ratio": None}
        for c in (1, 4) for s, k in (("padoc", 2.0), ("sequential", 1.0))]


def test_summary_scalars_flatten_the_baseline():
    s = {"pages": 2, "text_edit": 0.5, "strategy": "padoc", "baseline": {"strategy": "sequential", "pages_per_s": 3.0},
         "by_concurrency": ROWS, "meta": {"wall_s": 1.0}}
    assert summary_scalars(s) == {"pages": 2, "text_edit": 0.5, "baseline.pages_per_s": 3.0}


def test_jsonl_logger_writes_scalars_only(tmp_path):
    (tmp_path / "x.png").write_bytes(b"\x89PNG fake")
    lg = make_logger(None, tmp_path)
    log_outputs(lg, {"pages": 2, "by_concurrency": ROWS}, tmp_path)
    lg.finish()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"step": None, "pages": 2}]


def test_the_report_with_tables_and_notes_and_no_pages(tmp_path):
    png = concurrency_curves(ROWS, tmp_path / "c.png", "title")
    html = write_report(tmp_path, {"pages": 2}, {}, [png], tables={"by <concurrency>": ROWS},
                        notes=["run with concurrency=[1,4,16] <for> the curves"]).read_text()
    assert "by &lt;concurrency&gt;" in html and "<th>p95_latency_s</th>" in html and html.count("<tr>") == 2 + 1 + 4
    assert "concurrency=[1,4,16] &lt;for&gt;" in html and "Pages (" not in html and "alt='c.png'" in html


def test_wandb_offline_logs_plots_tables_and_report(case, tmp_path, monkeypatch):  # noqa: F811
    pytest.importorskip("wandb")
    for d in ("CONFIG", "CACHE", "DATA"):
        monkeypatch.setenv(f"WANDB_{d}_DIR", str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = case / "out"
    summary = evaluate_dir(str(case / "pred"), str(case / "gt.json"), out)
    summary["by_concurrency"] = ROWS  # as `run` writes it
    assert len(page_rows(out)) == 3
    from omegaconf import OmegaConf

    lg = make_logger(OmegaConf.create({"name": "wandb", "project": "treedec-test", "mode": "offline"}), out)
    log_outputs(lg, summary, out)
    lg.finish()
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    media = runs[0] / "files" / "media"
    images = sorted(p.name.rsplit("_", 2)[0] for p in (media / "images" / "plots").glob("*.png"))
    assert images == ["quality_by_page", "text_edit_hist"]
    tables = sorted(p.name.split("_")[0] for p in (media / "table" / "tables").glob("*.table.json"))
    assert tables == ["by", "pages"]
    pages = json.loads(next((media / "table" / "tables").glob("pages_*.table.json")).read_text())
    assert len(pages["data"]) == 3 and "text_edit" in pages["columns"]
    report = next((media / "html").glob("report_*.html")).read_text()
    assert "data:image/png;base64," in report
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["pages"] == 3
