"""Stages above the runtimes: a strategy's work around its own decode (`Strategy.before`,
`Strategy.after`: `treedec.strategies.stages`) run as runs of their own, each one
`runtime.run`, their figures merged into one `RunResult` (`run_strategy`, `run.py`).

- `before.py`: pages drafted whole (in this process, or in worker processes beside the first
  model run), HSD's stage 1 on their crops (one run), the drafts handed to the strategy's
  draft source, then the page decode (one run);
- `after.py`: the page decode (`crops`' layout pass, one run), then every region of every page
  read from its crop (one run), the readings spliced into the pages;
- `merge.py`: phases, forward passes, notes and per-page figures of the runs, as one run.
- `in_flight.py`: a run of crops holds a page's crops in flight together (`max_pages` x the most
  crops of a page).

No strategy runs a model and no runtime runs another: only this package calls `runtime.run`
more than once for a strategy."""
from treedec.run.stages.before import drafts_ahead
from treedec.run.stages.run import run_strategy

__all__ = ["drafts_ahead", "run_strategy"]
