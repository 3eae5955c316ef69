"""vLLM for the `runtime=vllm` backend: its config (`VLLMConfig`) and what a runtime serves
from (`VLLMEngines`): the folders vLLM reads a model (and an MTP head) from and one in-process
`LLMEngine` per (model, engine arguments), shared by the runs of that runtime and of the
runtimes built beside it, closed with it."""
from __future__ import annotations

import os
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treedec.engine.limits import PageLimits
from treedec.errors import UserError
from treedec.runtimes.base import config_from
from treedec.models.vlm import VLM
from treedec.runtimes.vllm.drafts import ENV_STORE, PROPOSER, DraftStore

SERVING_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "processor_config.json")
SERVING_WRITES = ("tokenizer", "processor", "preprocessor", "special_tokens", "chat_template")  # write_serving_files' files


@dataclass
class VLLMConfig(PageLimits):
    """`runtime=vllm` (treedec/conf/runtime/vllm.yaml). The page limits (`PageLimits`: pages in
    flight, `max_new_tokens` = a request's max_tokens, branches per page) mean what they mean
    for the embedded engine; the rest configures vLLM."""
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1  # independent engines, one process each, pages split between them
    block_size: int = 32  # KV block = prefix-cache granularity (vLLM CPU: a multiple of 32)
    enable_prefix_caching: bool = True
    max_num_seqs: int = 256  # requests scheduled per step
    max_num_batched_tokens: int | None = None  # null: enough for every admitted page's prefill in one step
    max_model_len: int | None = None  # null: the model's max positions
    kv_cache_gb: int = 1  # CPU: VLLM_CPU_KVCACHE_SPACE (GiB); GPU: ignored (gpu_memory_utilization decides)
    dtype: str = "float32"  # what the embedded engine computes in; greedy agreement is checked at this dtype
    enforce_eager: bool | None = None  # null: eager on CPU (no compile: starts in seconds, and ran faster here), compiled + CUDA graphs on GPU
    speculative_config: dict | None = None  # passed to vLLM as is (ngram, suffix, mtp, custom_class, ...)
    engine_args: dict = field(default_factory=dict)  # any other vllm.EngineArgs field
    threads: int = 2  # torch threads of this process (the in-process engine computes here)
    name: str = "vllm"

    @classmethod
    def from_cfg(cls, cfg: Any) -> "VLLMConfig":
        return config_from(cls, cfg, "runtime=vllm", "; other vLLM engine arguments go under runtime.engine_args")


def require_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        raise UserError("runtime=vllm needs vLLM: run scripts/install_vllm.sh (or pip install -e '.[vllm]' and "
                        f"remove torchvision/torchaudio/torchcodec on CPU); import failed: {e}") from None
    return vllm


@dataclass
class Served:
    """An in-process vLLM `LLMEngine` and, when its speculative method is treedec's page-draft
    proposer, the draft store that proposer reads (`drafts.py`)."""
    engine: Any
    drafts: DraftStore | None = None


class VLLMEngines:
    """What a vLLM runtime starts and writes, kept for its runs and closed with it: the folders
    vLLM serves models from (`serving_dir`) and MTP heads from (`folder`), scratch folders, and
    one `LLMEngine` per (model folder, engine arguments) (`engine`: one takes 20-90 s to start,
    so the passes of a `run` and `compare=` share it)."""

    def __init__(self):
        self.engines: dict[tuple, Served] = {}
        self._serving: "weakref.WeakKeyDictionary[VLM, Path]" = weakref.WeakKeyDictionary()
        self._folders: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
        self._scratch: list[tempfile.TemporaryDirectory] = []

    def scratch(self, prefix: str) -> Path:
        """A new temporary folder, removed on `close`."""
        tmp = tempfile.TemporaryDirectory(prefix=prefix)
        self._scratch.append(tmp)
        return Path(tmp.name)

    def folder(self, owner, key, make) -> Path:
        """The folder `make()` writes for (`owner`, `key`), made once (e.g. an MTP head's, per model)."""
        by_key = self._folders.setdefault(owner, {})
        if key not in by_key:
            by_key[key] = make()
        return by_key[key]

    def serving_dir(self, vlm: VLM, path: str | Path | None = None) -> Path:
        """A folder vLLM can serve `vlm` from: `path` itself when it holds every serving file
        (checkpoints saved by `VLM.save`), else a scratch folder (the weights linked from
        `path`, or `vlm` saved there when it has no folder, e.g. `model=random`)."""
        if path is not None and all((Path(path) / f).is_file() for f in SERVING_FILES):
            return Path(path).resolve()
        if vlm not in self._serving:
            self._serving[vlm] = _write_serving_dir(self.scratch("treedec-vllm-"), vlm, path)
        return self._serving[vlm]

    def engine(self, model_dir: Path, cfg: VLLMConfig, prompt_len: int) -> Served:
        """The engine serving `model_dir` with `cfg`'s engine arguments, started on first use."""
        kw = engine_kwargs(model_dir, cfg, prompt_len)
        key = (repr(sorted(kw.items(), key=lambda kv: kv[0])), cfg.kv_cache_gb)
        if key not in self.engines:
            store = None
            if (kw.get("speculative_config") or {}).get("model") == PROPOSER:
                # the page-draft proposer reads this engine's store; the path is fixed before the engine
                # (and any worker process it starts) exists, one store per engine
                store = DraftStore(self.scratch("treedec-vllm-drafts-") / "drafts.json")
                store.clear()
                os.environ[ENV_STORE] = str(store.path)
            # store: where runs of drafting strategies write their pages' drafts
            self.engines[key] = Served(start_engine(model_dir, kw, cfg), store)
        return self.engines[key]

    def close(self) -> None:
        """Shut the engines down and remove the folders written."""
        for served in self.engines.values():
            served.engine.engine_core.shutdown()  # vLLM's in-process client: the engine core and its executor
        self.engines.clear()
        self._serving.clear()
        self._folders.clear()
        for tmp in self._scratch:
            tmp.cleanup()
        self._scratch.clear()


def _write_serving_dir(d: Path, vlm: VLM, path: str | Path | None) -> Path:
    """`d` made a folder vLLM serves `vlm` from: the weights of `path` linked and the tokenizer and
    processor files written anew, or `vlm` saved there when `path` has no weights."""
    if path is not None and (Path(path) / "model.safetensors").is_file():
        from treedec.models.serving import write_serving_files

        for f in Path(path).iterdir():  # weights and configs linked; tokenizer/processor files written anew
            if f.is_file() and not f.name.startswith(SERVING_WRITES):
                (d / f.name).symlink_to(f.resolve())
        write_serving_files(d, vlm.tokenizer, vlm.spec.image_size, vlm.spec.image_tokens, vlm.spec.max_positions)
    else:
        vlm.save(d)
    return d


def engine_kwargs(model_dir: Path, cfg: VLLMConfig, prompt_len: int) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        model=str(model_dir), tokenizer=str(model_dir), dtype=cfg.dtype, seed=0, block_size=cfg.block_size,
        enable_prefix_caching=cfg.enable_prefix_caching, max_num_seqs=cfg.max_num_seqs,
        tensor_parallel_size=cfg.tensor_parallel_size, enforce_eager=_eager(cfg),
        limit_mm_per_prompt={"image": 1}, disable_log_stats=True,
        # one step can prefill every admitted page (and encode its image), as the embedded engine does
        max_num_batched_tokens=cfg.max_num_batched_tokens or max(8192, cfg.max_pages * (prompt_len + 2 * cfg.block_size)),
    )
    if cfg.max_model_len:
        kw["max_model_len"] = cfg.max_model_len
    if cfg.speculative_config:
        kw["speculative_config"] = dict(cfg.speculative_config)
    kw.update(dict(cfg.engine_args))
    return kw


def _eager(cfg: VLLMConfig) -> bool:
    if cfg.enforce_eager is not None:
        return bool(cfg.enforce_eager)
    import torch

    return not torch.cuda.is_available()


def _cpu_tp_binding(tp: int) -> None:
    """vLLM CPU binds each tensor-parallel worker to a NUMA node by default and refuses when
    there are fewer nodes than workers (one-node machines): split this process's CPUs
    between the workers instead, unless VLLM_CPU_OMP_THREADS_BIND says otherwise."""
    import torch

    if tp <= 1 or torch.cuda.is_available() or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < tp:
        raise UserError(f"tensor_parallel_size={tp} needs at least {tp} CPUs here, this process may use {len(cpus)}")
    per = len(cpus) // tp
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, cpus[i * per:(i + 1) * per]))
                                                       for i in range(tp))


def start_engine(model_dir: Path, kw: dict[str, Any], cfg: VLLMConfig):
    """An in-process `LLMEngine` with engine arguments `kw` (`engine_kwargs`); a config vLLM
    refuses is one line."""
    require_vllm()
    from treedec.runtimes.vllm.compat import ready_to_serve

    # an architecture vLLM cannot build here refused in one line; its family's mends applied (once, logged)
    ready_to_serve(model_dir, cfg.tensor_parallel_size)
    # one scheduler iteration per step() (exact per-page step accounting; branches join between steps)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(cfg.kv_cache_gb))
    import torch

    _cpu_tp_binding(cfg.tensor_parallel_size)
    from vllm import EngineArgs
    from vllm.v1.engine.llm_engine import LLMEngine

    # vLLM's CPU worker replaces torch.set_num_threads with a no-op for the whole process
    # (and drops to one thread); put both back so the rest of treedec behaves as before.
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        engine = LLMEngine.from_engine_args(EngineArgs(**kw))
    except (ValueError, TypeError, RuntimeError) as e:
        raise UserError(f"vLLM cannot serve {model_dir}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    finally:
        torch.set_num_threads = set_threads
    torch.set_num_threads(threads)  # the in-process engine computes with this process's threads
    return engine
