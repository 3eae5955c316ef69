"""`run executor=ray`: the pages of a pass as a Ray Data dataset, read by tasks in parallel,
drafted by a pool of drafter actors (HSD's pipeline drafts), decoded by a pool of decoder
actors each holding one runtime, their records streamed back to the driver, which writes
each page as it comes (`run`'s writer and resume journal: every page once, atomically) and
merges the pass's figures into one `RunResult`, as a one-process pass gives it.

A killed actor is restarted by Ray and its batch given to it again (Ray Data's actor pools:
`max_restarts=-1`, `max_task_retries=-1`); the `Ledger` counts the actors started and the
pages begun twice (`actors_replaced`, `pages_redone`). A batch that raises is decoded again
page by page, and a page that still raises is written flagged with the error, never dropped."""
from __future__ import annotations

import logging
import pickle
import time
from dataclasses import asdict
from typing import Any, Callable

from treedec.cluster.ledger import Ledger
from treedec.cluster.options import RayOptions
from treedec.cluster.results import merged
from treedec.cluster.pools import Decoder, Drafter, read_pages
from treedec.errors import UserError
from treedec.records import PageRecord, RunResult
from treedec.results.store import plain
from treedec.run.passes import charge_write

INSTALL_HINT = 'pip install -e ".[ray]"'


def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise UserError(f"executor=ray needs Ray Data: {INSTALL_HINT}") from None
    return ray


class RayExecutor:
    """One Ray connection for a run (a local Ray of `ray.num_cpus` CPUs, or the cluster at
    `ray.address`), every pass of the run on it (`run_pass`, as `treedec.run.passes.run_pass`)."""

    def __init__(self, options: RayOptions):
        self.options, self.ray = options, import_ray()
        t = time.perf_counter()
        self.started_here = not self.ray.is_initialized()
        if self.started_here:
            local = {"num_cpus": options.num_cpus} if options.address is None else {}
            try:
                self.ray.init(address=options.address, include_dashboard=False, log_to_driver=False,
                              logging_level=logging.WARNING, **local)
            except ConnectionError as e:
                raise UserError(f"ray.address={options.address}: no Ray cluster there ({e})") from None
        self.startup_s = time.perf_counter() - t
        self.ray.data.DataContext.get_current().enable_progress_bars = False  # the driver's own bar counts pages
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        self.passes: list[dict[str, Any]] = []

    def close(self) -> None:
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()

    def run_pass(self, strategy_cfg, vlm, samples, cfg, level: int, progress: bool = True,
                 on_record: Callable[[PageRecord], None] | None = None) -> RunResult:
        """`samples` decoded by `strategy_cfg` with `level` pages in flight in each decoder, each
        record handed to `on_record` as it reaches the driver; the pass's figures, its wall time
        from the first page asked to the last received."""
        from tqdm import tqdm

        from treedec.run.resume import page_names

        names = page_names(samples)
        restarted = self._restarts()
        ledger = self.ray.remote(Ledger).options(num_cpus=0).remote()
        drafted = self._drafted(strategy_cfg)
        t = time.perf_counter()
        records: dict[str, PageRecord] = {}
        runs: list[RunResult] = []
        write_s = 0.0
        bar = tqdm(total=len(names), desc=f"ray: {strategy_cfg['name']}", unit="page", disable=not progress)
        for row in self._dataset(strategy_cfg, vlm, names, cfg, level, drafted, ledger).iter_rows():
            rec = pickle.loads(row["record"])
            if row["result"]:
                runs.append(pickle.loads(row["result"]))
            records[rec.name] = rec
            if on_record is not None:
                w = time.perf_counter()
                on_record(rec)
                write_s += time.perf_counter() - w
            bar.update()
        bar.close()
        wall = time.perf_counter() - t
        pools = {"decode": self.options.decoders, "draft": self.options.drafters if drafted else 0}
        self.passes.append({"strategy": strategy_cfg["name"], "concurrency": level, "wall_s": round(wall, 3),
                            **self.ray.get(ledger.figures.remote(pools, wall)),
                            "actors_replaced": self._restarts() - restarted})
        self.ray.kill(ledger)
        res = merged(runs, [records[n] for n in names if n in records], wall, strategy_cfg["name"])
        if on_record is None:  # end to end: writing its pages charged, as a one-process pass is
            return charge_write(res)
        res.phases["write"] = write_s  # the driver wrote each page as it came, inside the wall time
        return res

    def _restarts(self) -> int:
        """The restarts Ray made of this job's actors so far (its actor table, as the GCS keeps it:
        a killed actor counts when Ray restarts it, before its constructor has run again)."""
        from ray._private.state import actors

        job = self.ray.JobID.from_hex(self.ray.get_runtime_context().get_job_id())
        return sum(a["NumRestarts"] for a in actors(job_id=job).values())

    def _drafted(self, strategy_cfg) -> bool:
        """Whether the pass's pages are drafted by drafter actors: a strategy drafting with the
        pipeline drafter (`drafts=pipeline`) and `ray.drafters` > 0."""
        return self.options.drafters > 0 and strategy_cfg.get("drafts") == "pipeline"

    def _dataset(self, strategy_cfg, vlm, names: list[str], cfg, level: int, drafted: bool, ledger):
        """read -> [draft] -> decode, as a Ray Data dataset of one row a page."""
        ray, opts = self.ray, self.options
        batch = max(1, min(opts.batch(level), -(-len(names) // opts.decoders)))  # every decoder given pages
        chunks = [names[i:i + batch] for i in range(0, len(names), batch)]
        ds = ray.data.from_items([{"names": c} for c in chunks], override_num_blocks=max(1, len(chunks)))
        ds = ds.flat_map(read_pages, num_cpus=opts.cpus_per_reader,
                         fn_kwargs={"data": plain(cfg.data), "model_pages": vlm.pages, "ledger": ledger})
        if drafted:
            ds = ds.map_batches(Drafter, batch_size=1, num_cpus=opts.cpus_per_drafter,
                                compute=ray.data.ActorPoolStrategy(size=opts.drafters, max_tasks_in_flight_per_actor=1),
                                fn_constructor_kwargs={"ocr": _plain_or_none(strategy_cfg.get("ocr")), "ledger": ledger})
        return ds.map_batches(Decoder, batch_size=batch, num_cpus=opts.cpus_per_decoder,
                              num_gpus=opts.gpus_per_decoder or None,
                              # one batch at a time an actor: a batch queued behind a busy decoder while another
                              # idles would leave the pool half used (4 pages, 2 decoders: one did all four)
                              compute=ray.data.ActorPoolStrategy(size=opts.decoders, max_tasks_in_flight_per_actor=1),
                              fn_constructor_kwargs={"cfg": plain(cfg), "strategy": plain(strategy_cfg),
                                                     "level": level, "drafted": drafted, "ledger": ledger})

    def figures(self) -> dict[str, Any]:
        """summary.json's keys about the executor: `actors_replaced` and `pages_redone` over every
        pass, and `ray` (its options, start-up, each pass's pools)."""
        return {"executor": "ray", "actors_replaced": sum(p["actors_replaced"] for p in self.passes),
                "pages_redone": sum(p["pages_redone"] for p in self.passes),
                "ray": {**asdict(self.options), "startup_s": round(self.startup_s, 3),
                        "cluster_cpus": self.ray.cluster_resources().get("CPU"), "passes": self.passes}}



def _plain_or_none(node) -> Any:
    return plain(node) if node is not None else None
