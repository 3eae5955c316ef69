"""Past one process: `run executor=ray` (Ray Data). The pages of each pass are a Ray Data
dataset read by tasks (`pools.read_pages`), drafted by drafter actors (`pools.Drafter`, HSD's
pipeline drafts), decoded by decoder actors each holding one runtime (`pools.Decoder`); the
driver writes every page as it comes (`executor.RayExecutor`), the run's journal and summary as
for a one-process run. `ledger.Ledger` counts what the actors did; `options.RayOptions` are
`ray.*`. Ray is imported only when `executor=ray` is asked for (the `ray` extra)."""
from __future__ import annotations

from treedec.errors import UserError

EXECUTORS = ("local", "ray")


def make_executor(cfg):
    """None for `executor=local` (the pass in this process); a `RayExecutor` for `executor=ray`."""
    name = cfg.get("executor", "local")
    if name == "local":
        return None
    if name != "ray":
        raise UserError(f"unknown executor {name!r}; use executor={' or executor='.join(EXECUTORS)}")
    from treedec.cluster.executor import RayExecutor
    from treedec.cluster.options import RayOptions

    return RayExecutor(RayOptions.from_cfg(cfg.get("ray")))
