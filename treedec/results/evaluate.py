"""Scoring predicted pages against OmniDocBench ground truth, per page and for the data set.

A prediction is Markdown (a string) or a `Page`. A page without a prediction, or whose
prediction cannot be read, is scored as empty and flagged; no page is ever dropped.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Union

from treedec.io.omnidocbench import page_from_omnidocbench
from treedec.metrics import (LayoutCounts, PageScore, PredBlock, dataset_figures, layout_counts, markdown_problems,
                             markdown_to_blocks, page_figures, page_to_blocks, score_page)
from treedec.page import Page

Prediction = Union[str, Page, None]
NO_PREDICTION = "no prediction: scored as empty"


def _blocks(pred: Prediction) -> tuple[list[PredBlock], list[str]]:
    if pred is None:
        return [], [NO_PREDICTION]
    try:
        if isinstance(pred, Page):
            return page_to_blocks(pred), []
        return markdown_to_blocks(pred), [f"malformed Markdown: {p}" for p in markdown_problems(pred)]
    except Exception as e:  # malformed input must not stop a run
        return [], [f"prediction could not be read ({type(e).__name__}: {e}): scored as empty"]


def evaluate_page(gt: Page, pred: Prediction) -> tuple[PageScore, dict[str, Any]]:
    """The page's score and its figures, with `flags` (and layout figures when `pred` is a Page)."""
    blocks, flags = _blocks(pred)
    try:
        score = score_page(gt, blocks)
    except Exception as e:  # a matcher failure on odd input: score as empty, say why
        flags.append(f"scoring failed ({type(e).__name__}: {e}): scored as empty")
        score = score_page(gt, [])
    figures: dict[str, Any] = {**page_figures(score), "layout_precision": None, "layout_recall": None,
                               "layout_f1": None}
    if isinstance(pred, Page):
        counts = layout_counts(pred, gt)
        figures.update(layout_precision=counts.precision, layout_recall=counts.recall, layout_f1=counts.f1,
                       layout_counts=[counts.matched, counts.predicted, counts.annotated])
    figures["flags"] = flags
    return score, figures


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    k, unique = 1, name
    while unique in taken:
        k += 1
        unique = f"{name}#{k}"
    return unique


def _layout_summary(per_page: Mapping[str, dict]) -> dict[str, Any]:
    total, seen = LayoutCounts(), False
    for fig in per_page.values():
        if "layout_counts" in fig:
            seen = True
            total.add(LayoutCounts(*fig["layout_counts"]))
    if not seen:
        return {"layout_precision": None, "layout_recall": None, "layout_f1": None}
    return {"layout_precision": total.precision, "layout_recall": total.recall, "layout_f1": total.f1}


def evaluate_pages(preds: Mapping[str, Prediction], gts: list[Page],
                   flags: Mapping[str, list[str]] | None = None, progress: bool = False) -> dict[str, Any]:
    """Data-set figures plus `per_page` (page name -> figures and `flags`). `preds` maps a
    page name (image stem) to its prediction; `flags` adds notes per page (e.g. from loading);
    `progress`: a progress bar (pages/s, ETA)."""
    from tqdm import tqdm

    per_page: dict[str, dict] = {}
    scores = []
    for gt in tqdm(gts, desc="evaluate", unit="page", disable=not progress):
        score, figures = evaluate_page(gt, preds.get(gt.name))
        figures["flags"] = list((flags or {}).get(gt.name, [])) + figures["flags"]
        scores.append(score)
        per_page[_unique(gt.name, per_page)] = figures
    known = {gt.name for gt in gts}
    return {**dataset_figures(scores), **_layout_summary(per_page), "pages": len(gts),
            "pages_flagged": sum(bool(f["flags"]) for f in per_page.values()),
            "predictions_without_ground_truth": sorted(set(preds) - known), "per_page": per_page}


def _page_json(path: Path) -> Page | None:
    """The page in an OmniDocBench/treedec JSON file; None if the file holds no page.
    Raises ValueError when it looks like a page but cannot be read."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        if len(data) != 1:
            raise ValueError(f"{path.name} holds {len(data)} pages, expected 1")
        data = data[0]
    if not isinstance(data, dict) or "layout_dets" not in data:
        return None
    return page_from_omnidocbench(data)


def _candidates(folder: Path, gt: Page) -> list[Path]:
    """Files that may hold a page's prediction, in order (the official evaluator's Markdown
    name variants included)."""
    stem, image = gt.name, Path(gt.image_path).name
    names = [f"{stem}.omnidocbench.json", f"{stem}.json", f"{stem}.md", f"{stem.replace('.pdf', '')}.mmd",
             f"{stem.replace('.pdf', '')}.md", f"{image}.md"]
    return [folder / n for n in dict.fromkeys(names)]


def load_prediction(folder: Path, gt: Page) -> tuple[Prediction, list[str]]:
    """A page's prediction from `folder` and any flags; (None, []) when there is none."""
    for path in _candidates(folder, gt):
        if not path.is_file():
            continue
        if path.suffix == ".json":
            try:
                page = _page_json(path)
            except Exception as e:  # a malformed file is flagged, never fatal
                return None, [f"{path.name} could not be read ({type(e).__name__}: {e})"]
            if page is not None:
                return page, []
            continue
        try:
            return path.read_text(encoding="utf-8"), []
        except UnicodeDecodeError:
            return path.read_text(encoding="utf-8", errors="replace"), [f"{path.name} is not valid UTF-8"]
    return None, []


def format_prediction(fmt, text: str, gt: Page) -> tuple[Prediction, list[str]]:
    """A raw output `text` in format `fmt` (a `treedec.formats.Format`) as the scorer takes it:
    Markdown as its text (read as OmniDocBench reads Markdown, its problems flagged there), any
    other format parsed into a page, the reader's repairs as flags."""
    if fmt.scored_as_markdown:
        return text, []
    result = fmt.parse(text, gt.width, gt.height, gt.image_path)
    return result.page, [f"{fmt.name} output: {r}" for r in result.repairs]


RAW_SUFFIXES = (".txt", ".md", ".mmd", ".json", "")


def load_raw_predictions(folder: str | Path, gts: list[Page], fmt) -> tuple[dict[str, Prediction], dict[str, list[str]]]:
    """Each ground-truth page's raw output in format `fmt` from `folder` (one file per page named
    by image stem: .txt, .md, .mmd, .json or no suffix), as the scorer takes it, and its flags."""
    folder = Path(folder)
    preds, flags = {}, {}
    for gt in gts:
        path = next((p for p in (folder / f"{gt.name}{s}" for s in RAW_SUFFIXES) if p.is_file()), None)
        if path is None:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        preds[gt.name], notes = format_prediction(fmt, text, gt)
        if notes:
            flags[gt.name] = notes
    return preds, flags


def format_floor(gts: list[Page], fmt) -> dict[str, Any]:
    """Format `fmt`'s floor on `gts`: each ground-truth page written in the format and read back,
    scored as any prediction; `text_edit_vs_truth` is its text edit minus the ground truth's own
    (the ground-truth pages scored as their own predictions)."""
    preds, flags = {}, {}
    for gt in gts:
        preds[gt.name], notes = format_prediction(fmt, fmt.render(gt), gt)
        if notes:
            flags[gt.name] = notes
    result = evaluate_pages(preds, gts, flags)
    result["text_edit_truth"] = evaluate_pages({g.name: g for g in gts}, gts)["text_edit"]
    result["text_edit_vs_truth"] = result["text_edit"] - result["text_edit_truth"]
    return result


def load_predictions(folder: str | Path, gts: list[Page]) -> tuple[dict[str, Prediction], dict[str, list[str]]]:
    """Predictions for every ground-truth page found in `folder` (one Markdown or JSON file
    per page, named by image stem), and flags for files that could not be read."""
    folder = Path(folder)
    preds, flags = {}, {}
    for gt in gts:
        pred, notes = load_prediction(folder, gt)
        if pred is not None:
            preds[gt.name] = pred
        if notes:
            flags[gt.name] = notes
    return preds, flags
