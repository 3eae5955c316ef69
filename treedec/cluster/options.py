"""`run executor=ray`'s options (`ray.*` in treedec/conf/run.yaml), checked once."""
from __future__ import annotations

from dataclasses import dataclass

from treedec.errors import UserError
from treedec.runtimes.base import config_from


@dataclass(frozen=True)
class RayOptions:
    """Where the run's actors live and what each reserves. The defaults fit two decoders and
    two drafters (and the readers beside them) on a two-core machine."""
    address: str | None = None  # null: a local Ray of this machine's cores; auto: the cluster `ray start` made
    decoders: int = 1  # actors each holding one runtime (runtime.max_pages pages in flight each)
    drafters: int = 1  # HSD's pipeline drafter as actors of its own (strategies drafting with drafts=pipeline)
    cpus_per_decoder: float = 0.5
    cpus_per_drafter: float = 0.25
    gpus_per_decoder: float = 0.0
    cpus_per_reader: float = 0.25  # the tasks that read the pages (images, PDF pages)
    pages_per_batch: int | None = None  # pages a decoder takes at once; null: 2 x runtime.max_pages
    num_cpus: int | None = None  # a local Ray's CPUs (null: the machine's); ignored when joining a cluster

    @classmethod
    def from_cfg(cls, cfg) -> "RayOptions":
        opts = config_from(cls, cfg, "ray")
        for key in ("decoders", "drafters"):
            value = getattr(opts, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "decoders" else 0):
                raise UserError(f"ray.{key} must be a whole number >= {1 if key == 'decoders' else 0}, got {value!r}")
        for key in ("cpus_per_decoder", "cpus_per_drafter", "gpus_per_decoder", "cpus_per_reader"):
            value = getattr(opts, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UserError(f"ray.{key} must be a number >= 0, got {value!r}")
        if opts.pages_per_batch is not None and (not isinstance(opts.pages_per_batch, int) or opts.pages_per_batch < 1):
            raise UserError(f"ray.pages_per_batch must be a whole number >= 1 or null, got {opts.pages_per_batch!r}")
        return opts

    def batch(self, max_pages: int) -> int:
        return self.pages_per_batch or 2 * int(max_pages)
