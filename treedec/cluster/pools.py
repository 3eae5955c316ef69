"""The three pools of a Ray run, each a Ray Data transform: `read_pages` (tasks: a chunk
of page names read from the data set, one row a page), `Drafter` (actors: HSD's pipeline
drafter on each page, its draft carried in the row) and `Decoder` (actors: one runtime each,
a batch of pages decoded as `run` decodes them, one record a row). Rows carry pickled
samples, drafts as OmniDocBench JSON and pickled `PageRecord`s; every actor says to the run's
`Ledger` when it starts and what it did."""
from __future__ import annotations

import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from treedec.cluster.ledger import register, working
from treedec.cluster.results import merged
from treedec.records import RunResult, failed


def read_pages(row: dict[str, Any], data: dict, model_pages: dict | None, ledger) -> list[dict[str, Any]]:
    """The pages a chunk names (`row["names"]`), read as a one-process run reads them
    (flagged pages kept): a row each, its sample pickled."""
    from treedec.data import open_dataset
    from treedec.data.subset import pages_named

    names = list(row["names"])
    with working(ledger, "read", names):
        samples = list(pages_named(open_dataset(data, model_pages=model_pages), names))
        return [{"name": s.name, "sample": pickle.dumps(s)} for s in samples]


class Drafter:
    """HSD's pipeline drafter in an actor of its own: each page's draft (`ocr`: the strategy's
    drafter options) made as `draft_pages` makes it, carried as OmniDocBench JSON ("" for a
    page without an image)."""

    def __init__(self, ocr: dict | None, ledger):
        from treedec.ocr.drafters import Drafters
        from treedec.ocr.pipeline import config_of

        self.config = config_of(ocr, "strategy.ocr")
        self.drafters, self.ledger = Drafters(), ledger
        self.cache = tempfile.TemporaryDirectory(prefix="treedec-ray-drafts-")  # cold: every page drafted here
        register(ledger, "draft")

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from treedec.io.omnidocbench import page_to_omnidocbench
        from treedec.ocr.cache import draft_pages

        names = [str(n) for n in batch["name"]]
        with working(self.ledger, "draft", names):
            samples = [pickle.loads(b) for b in batch["sample"]]
            pages = draft_pages([s for s in samples if s.image is not None], self.cache.name, config=self.config,
                                progress=False, drafters=self.drafters)
            drafts = [json.dumps(page_to_omnidocbench(pages[s.name])) if s.name in pages else "" for s in samples]
        return {"name": names, "sample": list(batch["sample"]), "draft": drafts}


class Decoder:
    """One runtime in an actor: the run's model loaded once, each batch of pages decoded by
    the strategy as `run` decodes them (`run_strategy`: the warm-up on its first batch only),
    each page's record pickled; the batch's run figures on its first row. With drafts from the
    drafter actors (`drafted`), they are handed to the strategy as a folder of drafts
    (`strategy.drafts=DIR`), as drafts made beforehand are."""

    def __init__(self, cfg: dict, strategy: dict, level: int, drafted: bool, ledger):
        import torch
        from omegaconf import OmegaConf

        from treedec.formats.declare import model_format
        from treedec.models.loader import load_vlm
        from treedec.runtimes.select import make_runtime
        from treedec.strategies.base import build_strategy

        cfg = OmegaConf.create(cfg)
        torch.set_num_threads(int(cfg.runtime.threads))
        self.folder = tempfile.TemporaryDirectory(prefix="treedec-ray-page-drafts-") if drafted else None
        if self.folder is not None:
            strategy = {**strategy, "drafts": self.folder.name}
        self.vlm = load_vlm(cfg.model)
        self.runtime = make_runtime(OmegaConf.merge(cfg.runtime, {"max_pages": level}))
        self.strategy = build_strategy(strategy, self.vlm.tokenizer, model_format(cfg.model, self.vlm))
        self.cold = bool(cfg.get("cold_drafts", True))
        self.ledger, self.warm = ledger, False
        register(ledger, "decode")

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        names = [str(n) for n in batch["name"]]
        with working(self.ledger, "decode", names):
            samples = [pickle.loads(b) for b in batch["sample"]]
            if self.folder is not None:
                for name, draft in zip(names, batch["draft"]):
                    if draft:
                        Path(self.folder.name, f"{name}.json").write_text(draft, encoding="utf-8")
            try:
                res = self._decode(samples)
            except Exception:  # noqa: BLE001 - a batch that raises: its pages one by one, one that still raises flagged
                res = self._one_by_one(samples)
        records = {r.name: r for r in res.records}
        res.records, res.forwards = [], None  # the run's figures travel once, beside the records
        return {"name": names, "record": [pickle.dumps(records[n]) for n in names],
                "result": [pickle.dumps(res) if i == 0 else b"" for i in range(len(names))]}

    def _decode(self, samples: list) -> RunResult:
        from treedec.run.stages import run_strategy

        res = run_strategy(self.runtime, self.vlm, self.strategy, samples, progress=False, warmup=not self.warm,
                           cold_drafts=self.cold)
        self.warm = True
        return res

    def _one_by_one(self, samples: list) -> RunResult:
        runs, records, t = [], [], time.perf_counter()
        for s in samples:
            try:
                runs.append(self._decode([s]))
                records += runs[-1].records
            except Exception as e:  # noqa: BLE001 - the page is written flagged with the error
                records.append(failed(s, e))
        return merged(runs, records, time.perf_counter() - t, self.strategy.name)
