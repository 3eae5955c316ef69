"""What `run` says about its inputs: flagged and unreadable pages, skipped files, the
default model on real pages, and the summary of an interrupted run."""
from __future__ import annotations

import base64
import io
import itertools
import sys
from typing import Any, Mapping, Sequence

from treedec.data import FilesDataset
from treedec.errors import UserError
from treedec.io.documents import write_documents
from treedec.io.markdown import page_to_markdown
from treedec.report.plots import draw_regions
from treedec.report.lead import PageView
from treedec.records import sample_size

MAX_LISTED = 200  # skipped files named in summary.json (the count is always there)


def model_notes(cfg) -> list[str]:
    """One plain note when the shipped tiny model meets pages it was not trained on."""
    if cfg.data.name == "synth" or cfg.model.get("name") != "tiny" or cfg.model.get("path"):
        return []
    return ["the default model is a tiny model trained on treedec's synthetic pages only: on real scans or PDFs its "
            "output means nothing. Give a real checkpoint with model.path=DIR (e.g. a local Qwen3-VL folder)."]


def documents_of(samples) -> dict[str, list[str]]:
    return samples.documents if isinstance(samples, FilesDataset) else {}


def input_figures(samples, records: Sequence) -> dict[str, Any]:
    """summary.json keys about the inputs: `pages_flagged`, `pages_unreadable`, `page_flags`
    (flagged page -> its reasons), `inputs_skipped` (files of other kinds under data.root)."""
    flagged = {r.name: list(r.flags) for r in records if r.flags}
    out: dict[str, Any] = {"pages_flagged": len(flagged),
                           "pages_unreadable": sum(any(f.startswith("unreadable") for f in r.flags) for r in records)}
    if isinstance(samples, FilesDataset):
        out["inputs_skipped_count"] = len(samples.skipped)
        out["inputs_skipped"] = samples.skipped[:MAX_LISTED]
    out["page_flags"] = flagged
    return out


def drafter_figures(strategy) -> dict[str, Any]:
    """summary.json's `drafter` = {engine, precision, why} for a strategy that drafts with the
    pipeline drafter (strategy.drafts=pipeline): the pair its options mean on this CPU; for drafts
    read from a `draft` command's folder, that command's; {} for a strategy without such drafts."""
    import json
    from pathlib import Path

    drafts = strategy.get("drafts")
    if drafts is None or drafts == "oracle":
        return {}
    if drafts == "pipeline":
        from treedec.ocr.pipeline import PipelineConfig, config_of

        config = config_of(strategy.get("ocr"), "strategy.ocr") or PipelineConfig()
        return {"drafter": config.described()}
    from treedec.ocr.folder import SUBDIR

    folder = Path(str(drafts)).expanduser()  # a `draft` command's out=DIR, or DIR/drafts (treedec.ocr.folder)
    made = (folder.parent if folder.name == SUBDIR else folder) / "summary.json"
    try:
        kept = json.loads(made.read_text(encoding="utf-8")).get("drafter")
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict):
        return {"drafter": {**kept, "why": f"drafts read from {drafts}: {kept.get('why', '')}".rstrip(": ")}}
    return {"drafter": {"engine": None, "precision": None, "why": f"drafts read from {drafts} (made elsewhere)"}}


FLAGS_NAMED = 3  # flagged pages the report's top and the terminal's last lines name


def flagged_line(summary: Mapping[str, Any]) -> str | None:
    """One line naming how many pages were flagged (unreadable among them) and the first few,
    each with its first reason; None when none was."""
    flags = summary.get("page_flags") or {}
    if not flags:
        return None
    named = "; ".join(f"{name} ({reasons[0]})" for name, reasons in itertools.islice(flags.items(), FLAGS_NAMED))
    more = f"; and {len(flags) - FLAGS_NAMED} more" if len(flags) > FLAGS_NAMED else ""
    unreadable = f", {summary['pages_unreadable']} unreadable" if summary.get("pages_unreadable") else ""
    return (f"{len(flags)} of {summary['pages']} pages flagged{unreadable}: {named}{more} "
            f"(every page's reasons: summary.json page_flags)")


def check_some_readable(out, summary: dict[str, Any]) -> None:
    """After writing everything: not one readable page is the user's problem, so the run
    fails (one line, non-zero exit), with summary.json written first."""
    if summary["pages"] and summary.get("pages_unreadable") == summary["pages"]:
        out.summary(summary, "run")
        raise UserError(f"none of the {summary['pages']} input pages could be read "
                        f"(reasons in {out.dir}/summary.json, page_flags)")


def interrupted(cfg, out, samples, written: Mapping[str, Any], earlier: Mapping[str, Any] | None = None) -> None:
    """Ctrl-C: the pages already written stay; write the summary of what was done (`earlier`:
    the pages of earlier sittings, treedec.run.resume), then exit 130 (the shell's code for an interrupt)."""
    for rec in written.values():  # again: Ctrl-C may have cut the last one's files short
        out.page(rec.name, rec.figures(), rec.page)
    every = {**(earlier or {}), **written}
    records = list(every.values())
    write_documents(out.dir / "documents", documents_of(samples), every)
    summary = {"interrupted": True, "strategy": cfg.strategy.name, "pages": len(samples), "pages_done": len(records),
               "resumed_pages": len(earlier or {}), **input_figures(samples, records)}
    out.summary(summary, "run")
    print(f"\ninterrupted: {len(records)} of {len(samples)} pages done and written to {out.dir}/pages; "
          f"summary in {out.dir}/summary.json", file=sys.stderr)
    raise SystemExit(130)


def page_views(samples, records: Mapping[str, Any], n: int) -> list[PageView]:
    """The first `n` pages as the report shows them: read again (lazily), predicted regions
    drawn on the image (coloured by branch), with the Markdown and the flags."""
    views = []
    for s in itertools.islice(iter(samples), max(0, int(n))):
        rec = records.get(s.name)
        if rec is None:
            continue
        jpeg = None
        if s.image is not None:
            buf = io.BytesIO()
            draw_regions(s.image, rec.page.blocks, sample_size(s), by_branch=rec.streams > 1).save(buf, "JPEG",
                                                                                                  quality=80)
            jpeg = base64.b64encode(buf.getvalue()).decode("ascii")
        views.append(PageView(s.name, jpeg, page_to_markdown(rec.page).strip(), list(rec.flags)))
    return views
