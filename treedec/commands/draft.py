"""`python -m treedec draft data=... out=DIR`: the pipeline drafter alone (the one HSD strategies
draft with, `treedec.ocr.pipeline`). Each page's draft goes to `DIR/drafts/<page name>.json`
as OmniDocBench JSON, the folder `strategy.drafts=DIR` reads (`treedec.ocr.folder`): drafts
made once, on other machines, reused by any run. `pages/<name>.json` holds each page's CPU
seconds per stage and its flags; `summary.json` the CPU seconds per page (`cpu_s_per_page`:
this process's CPU over the pages, its start-up included) and their split by stage.

A page that cannot be read, or that the drafter fails on, is written flagged (an empty
draft saying why), never dropped. Needs the `hsd` extra, not torch."""
from __future__ import annotations

import time
from collections.abc import Sized
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from treedec.data import open_dataset
from treedec.io.omnidocbench import page_to_omnidocbench
from treedec.ocr.clock import STAGES
from treedec.ocr.folder import HASH_KEY, SUBDIR, draft_file
from treedec.page import Page
from treedec.run.outputs import RunOutput, write_json


def drafter_of(options):
    """The pipeline drafter `options` (`ocr=` on the command line) configure."""
    from treedec.ocr.pipeline import PipelineOCR, config_of

    return PipelineOCR(config_of(options, "ocr"))


def draft_page(drafter, sample) -> tuple[Page | None, dict[str, Any]]:
    """`sample`'s draft and its figures (CPU seconds per stage, flags); a page without an image,
    or one the drafter fails on, gets an empty draft flagged with the reason (None when its
    size is unknown)."""
    from treedec.ocr.cache import draft_image_path, image_hash

    flags = list(sample.flags)
    if sample.image is None:
        gt = sample.page
        reason = flags[0] if flags else "no image"
        page = None if gt is None else Page(width=gt.width, height=gt.height, image_path=draft_image_path(sample),
                                            info={"drafter": drafter.tag, "draft_flag": reason})
        return page, {"flags": flags or [reason]}
    drafter.clock.reset()
    start = time.process_time()
    try:
        page = drafter.draft(sample.image, draft_image_path(sample))
    except Exception as e:  # noqa: BLE001 -- one page's failure must not lose the others
        w, h = sample.image.size
        reason = f"drafter failed: {type(e).__name__}: {e}"
        page, flags = Page(width=w, height=h, image_path=draft_image_path(sample),
                           info={"drafter": drafter.tag, "draft_flag": reason}), flags + [reason]
    cpu = time.process_time() - start
    page.info[HASH_KEY] = image_hash(sample.image)
    return page, {"cpu_s": round(cpu, 4), "stages_cpu_s": {k: round(v, 4) for k, v in drafter.clock.reset().items()},
                  "blocks": len(page.blocks), "flags": flags}


def _table(summary: dict[str, Any]) -> Table:
    t = Table(title=f"Drafted {summary['pages_drafted']} of {summary['pages']} pages "
                    f"({summary['pages_flagged']} flagged): CPU-s per page by stage")
    t.add_column("stage")
    t.add_column("CPU-s / page", justify="right")
    for stage, v in summary["stage_cpu_s_per_page"].items():
        t.add_row(stage, f"{v:.3f}")
    t.add_row("all (start-up included)", "-" if summary["cpu_s_per_page"] is None else f"{summary['cpu_s_per_page']:.3f}")
    return t


def main(cfg, out: RunOutput) -> dict[str, Any]:
    """The CLI entry: `python -m treedec draft data=... out=DIR`."""
    data = open_dataset(cfg.data)
    drafter = drafter_of(cfg.get("ocr"))
    drafter._load()
    folder = out.dir / SUBDIR
    stages = dict.fromkeys(STAGES, 0.0)
    stages["load"] = drafter.clock.reset()["load"]
    pages = drafted = flagged = 0
    for sample in tqdm(data, total=len(data) if isinstance(data, Sized) else None, desc="drafting", unit="page"):
        page, figures = draft_page(drafter, sample)
        pages += 1
        flagged += bool(figures["flags"])
        if "cpu_s" in figures:
            drafted += 1
            for k, v in figures["stages_cpu_s"].items():
                stages[k] += v
        if page is not None:
            draft_file(folder, sample.name).parent.mkdir(parents=True, exist_ok=True)
            write_json(draft_file(folder, sample.name), page_to_omnidocbench(page))
        out.page(sample.name, figures)
    cpu = time.process_time()  # this process's CPU: start-up, model loading and every page
    summary = {
        "pages": pages, "pages_drafted": drafted, "pages_flagged": flagged, "data": cfg.data.name,
        "drafter": drafter.described, "drafts": str(folder),
        "cpu_s": round(cpu, 3), "cpu_s_per_page": round(cpu / drafted, 4) if drafted else None,
        "other_cpu_s": round(cpu - sum(stages.values()), 3),  # outside the stages: start-up, reading pages, writing
        "stage_cpu_s_per_page": {k: round(v / drafted, 4) if drafted else 0.0 for k, v in stages.items()},
        "onnxruntime_threads": {"intra_op": drafter.config.threads, "inter_op": 1},
    }
    Console().print(_table(summary))
    return summary
