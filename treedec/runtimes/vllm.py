"""The vLLM runtime: PaDoc's request-level realization of a strategy on stock vLLM.

Every stream of a page's decoding graph is one vLLM request whose prompt is the stream's
ancestors (`DecodingGraph.context`: image prompt + parent tokens up to the fork point +
the stream's first tokens, e.g. `<CHILD>`), decoded greedily. The root request (the flat
stream for `sequential`, the layout stream for `padoc`) streams its tokens back step by
step; the strategy's own fork rule runs on them, exactly as in the embedded engine, and
each fork submits a branch request between two engine steps, so it is decoded
concurrently with the layout and the other branches (continuous batching). vLLM's
automatic prefix caching stores the shared image + layout prefix once per block
(`block_size` tokens), so a branch prefills only the tail past the last full cached block.

The engine runs in this process (`LLMEngine`, `VLLM_ENABLE_V1_MULTIPROCESSING=0`) so that
one `step()` is one scheduler iteration: a page's `steps` are the iterations in which it
had a request running, the same accounting as the embedded engine's critical path
(prefill included). Tensor parallelism is vLLM's own (`tensor_parallel_size`); data
parallelism runs `data_parallel_size` independent engines in worker processes, each on
its share of the pages (what vLLM's offline data-parallel recipe does for dense models).

Drafting strategies (`hsd`, `padoc_hsd`) run through vLLM's speculative decoding: the
engine gets treedec's `custom_class` proposer (`vllm_drafts.py`), which serves the pages'
drafts, written to a per-engine draft store, as linear chains (HSD's stage 1 is skipped);
greedy verification keeps the base strategy's pages.

What stock vLLM cannot do for our strategies, and what this backend does instead, is in
README.md beside this file.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import tempfile
import time
import weakref
from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from treedec.engine.engine import PageResult, PageState
from treedec.engine.policy import Fork
from treedec.engine.rules import may_fork, take_token
from treedec.errors import UserError
from treedec.graph import DecodingGraph
from treedec.models.vlm import VLM, canvas
from treedec.runtimes.vllm_drafts import ENV_STORE, PROPOSER, DraftStore, page_draft_sequences
from treedec.strategies.base import Strategy

SERVING_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "processor_config.json")
SERVING_WRITES = ("tokenizer", "processor", "preprocessor", "special_tokens", "chat_template")  # write_serving_files' files


@dataclass
class VLLMConfig:
    """`runtime=vllm` (treedec/conf/runtime/vllm.yaml). The page limits mean what they mean
    for the embedded engine; the rest configures vLLM."""
    max_pages: int = 16  # pages decoded concurrently (their requests share the engine)
    max_new_tokens: int = 1024  # per stream (request max_tokens); a stream reaching it is cut and flagged
    max_branches: int = 128  # streams per page
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
        if cfg is None:
            return cls()
        if isinstance(cfg, cls):
            return cfg
        try:
            from omegaconf import DictConfig, OmegaConf

            if isinstance(cfg, DictConfig):
                cfg = OmegaConf.to_container(cfg, resolve=True)
        except ImportError:  # pragma: no cover - omegaconf is a core dependency
            pass
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise UserError(f"runtime=vllm has no option(s) {', '.join(unknown)}; "
                            f"other vLLM engine arguments go under runtime.engine_args")
        return cls(**dict(cfg))


# ---------------------------------------------------------------------- import / engine
def require_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        raise UserError("runtime=vllm needs vLLM: run scripts/install_vllm.sh (or pip install -e '.[vllm]' and "
                        f"remove torchvision/torchaudio/torchcodec on CPU); import failed: {e}") from None
    return vllm


_SERVING_DIRS: "weakref.WeakKeyDictionary[VLM, Path]" = weakref.WeakKeyDictionary()
_TMP: list[tempfile.TemporaryDirectory] = []


def serving_dir(vlm: VLM, path: str | Path | None = None) -> Path:
    """A folder vLLM can serve `vlm` from: `path` itself when it holds every serving file
    (checkpoints saved by `VLM.save`), else a temporary folder (the weights linked from
    `path`, or `vlm` saved there when it has no folder, e.g. `model=random`)."""
    if path is not None and all((Path(path) / f).is_file() for f in SERVING_FILES):
        return Path(path).resolve()
    if vlm in _SERVING_DIRS:
        return _SERVING_DIRS[vlm]
    tmp = tempfile.TemporaryDirectory(prefix="treedec-vllm-")
    _TMP.append(tmp)
    d = Path(tmp.name)
    if path is not None and (Path(path) / "model.safetensors").is_file():
        from treedec.models.serving import write_serving_files

        for f in Path(path).iterdir():  # weights and configs linked; tokenizer/processor files written anew
            if f.is_file() and not f.name.startswith(SERVING_WRITES):
                (d / f.name).symlink_to(f.resolve())
        write_serving_files(d, vlm.tokenizer, vlm.spec.image_size, vlm.spec.image_tokens, vlm.spec.max_positions)
    else:
        vlm.save(d)
    _SERVING_DIRS[vlm] = d
    return d


_ENGINES: dict[tuple, Any] = {}
_RUNS = itertools.count()


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


def get_engine(model_dir: Path, cfg: VLLMConfig, prompt_len: int):
    """One `LLMEngine` per (model folder, engine arguments), kept for the process: an
    engine takes 20-90 s to start, so `compare=` runs and tests share it."""
    kw = engine_kwargs(model_dir, cfg, prompt_len)
    key = (repr(sorted(kw.items(), key=lambda kv: kv[0])), cfg.kv_cache_gb)
    if key in _ENGINES:
        return _ENGINES[key]
    store = None
    if (kw.get("speculative_config") or {}).get("model") == PROPOSER:
        # the page-draft proposer reads this engine's store; the path is fixed before the engine
        # (and any worker process it starts) exists, one store per engine
        tmp = tempfile.TemporaryDirectory(prefix="treedec-vllm-drafts-")
        _TMP.append(tmp)
        store = DraftStore(Path(tmp.name) / "drafts.json")
        store.clear()
        os.environ[ENV_STORE] = str(store.path)
    # one scheduler iteration per step() (exact per-page step accounting; branches join between steps)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(cfg.kv_cache_gb))
    require_vllm()
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
    engine.treedec_drafts = store  # where runs of drafting strategies write their pages' drafts
    _ENGINES[key] = engine
    return engine


# ---------------------------------------------------------------------- decoding
@dataclass(kw_only=True)
class _Page(PageState):
    image: Any  # the canvas the embedded engine builds its pixels from
    uuid: str  # content hash of the canvas: vLLM's multimodal (and prefix-cache) key
    open: dict[str, int] = field(default_factory=dict)  # running request id -> stream
    cached: int = 0  # prompt tokens served from the prefix cache (all requests)
    prompt_tokens: int = 0
    # PageState.drafted here: draft tokens vLLM scheduled for verification (requests vLLM
    # finished itself); accepted: a step's new tokens of a request minus its one sampled token


class VLLMRunner:
    """Decodes pages with a strategy on one vLLM engine (the embedded engine's contract:
    `run(items)` yields `PageResult`s as pages finish)."""

    def __init__(self, engine, vlm: VLM, strategy: Strategy, cfg: VLLMConfig):
        if drafting(strategy):
            why = draft_refusal(strategy, cfg)
            if why is None and getattr(engine, "treedec_drafts", None) is None:
                why = (f"strategy {strategy.name!r} needs an engine with treedec's page-draft proposer "
                       "(parse_pages_vllm builds it and writes the drafts)")
            if why:
                raise UserError(why)
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self.engine, self.vlm, self.strategy, self.cfg = engine, vlm, strategy, cfg
        self.run_id = next(_RUNS)  # request ids stay unique on the shared engine
        tok = vlm.tokenizer
        self.image_prefix = vlm.prompt_ids(strategy.mode)[:-1]  # expanded by vLLM's processor from one <image>
        self.params = SamplingParams(temperature=0.0, max_tokens=cfg.max_new_tokens, stop_token_ids=[tok.eos_id],
                                     skip_special_tokens=False, detokenize=False,
                                     output_kind=RequestOutputKind.DELTA)
        self.active: dict[int, _Page] = {}
        self.requests: dict[str, _Page] = {}
        self._next_pid = 0
        self.forward_passes = 0
        self.prompt_tokens = 0  # prompt tokens of every request of the finished pages ...
        self.cached_tokens = 0  # ... and how many of them the prefix cache served
        self.cache_figures: dict[str, dict] = {}  # per finished page

    # ------------------------------------------------------------------ public
    def run(self, items: Iterable[tuple[str, Any, Any]]) -> Iterator[PageResult]:
        """Decode `(name, image, sample)` items with continuous batching; yields results as
        pages finish (completion order)."""
        t0 = time.perf_counter()
        queue = deque((name, image, sample, t0) for name, image, sample in items)
        try:
            while queue or self.active:
                while queue and len(self.active) < self.cfg.max_pages:
                    self._admit(*queue.popleft())
                working = [p for p in self.active.values() if p.open]
                if working:
                    touched: dict[int, list[int]] = {}
                    for out in self.engine.step():
                        self._on_output(out, touched)
                    self.forward_passes += 1
                    for page in working:
                        page.steps += 1
                        page.timeline.append(touched.get(page.pid, []))
                for page in [p for p in self.active.values() if not p.open]:
                    yield self._retire(page)
        finally:  # stopped early or failed: leave the shared engine with no requests of ours
            if self.requests:
                self.engine.abort_request(list(self.requests))
                self.requests.clear()

    # ------------------------------------------------------------------ pages
    def _admit(self, name: str, image, sample, t_submit: float) -> None:
        pic = canvas(image, self.vlm.spec.image_size)
        uuid = hashlib.blake2b(pic.tobytes(), digest_size=16).hexdigest()
        page = _Page(pid=self._next_pid, name=name, sample=sample, image=pic, uuid=uuid, graph=DecodingGraph(),
                     t_submit=t_submit, t_admit=time.perf_counter())
        self._next_pid += 1
        self.active[page.pid] = page
        root = page.graph.root(self.vlm.prompt_ids(self.strategy.mode), label="root")
        self._submit(page, root.id)

    def _retire(self, page: _Page) -> PageResult:
        del self.active[page.pid]
        self.cached_tokens += page.cached
        self.prompt_tokens += page.prompt_tokens
        self.cache_figures[page.name] = {"prompt_tokens": page.prompt_tokens, "cached_prompt_tokens": page.cached}
        now = time.perf_counter()
        return PageResult(page.name, page.graph, page.steps, now - page.t_admit, page.t_admit - page.t_submit,
                          page.flags, page.timeline, page.sample, page.drafted, page.accepted)

    # ------------------------------------------------------------------ requests
    def _prompt(self, page: _Page, sid: int) -> list[int] | None:
        """The stream's ancestor context with the image prompt folded back to one `<image>`
        (vLLM's processor expands it); None when vLLM could not be given this prompt."""
        ctx = page.graph.context(sid)
        n = len(self.image_prefix)
        if ctx[:n] != self.image_prefix or self.vlm.tokenizer.image_id in ctx[n:]:
            return None
        return [self.vlm.tokenizer.image_id] + ctx[n:]

    def _submit(self, page: _Page, sid: int) -> None:
        g = page.graph
        ids = self._prompt(page, sid)
        if ids is None:
            g.finish(sid, "unservable prompt", cut=True)
            page.flags.append(f"cut: stream {sid} ({g[sid].label}): its prompt holds an <image> token after the "
                              "image, which vLLM's processor would take for a second image")
            return
        rid = f"{self.run_id}-{page.pid}:{sid}"
        prompt = {"prompt_token_ids": ids, "multi_modal_data": {"image": page.image},
                  "multi_modal_uuids": {"image": [page.uuid]}}
        try:
            self.engine.add_request(rid, prompt, self.params)
        except ValueError as e:  # e.g. prompt longer than max_model_len
            g.finish(sid, "rejected by vLLM", cut=True)
            page.flags.append(f"cut: stream {sid} ({g[sid].label}) rejected by vLLM: {str(e).splitlines()[0]}")
            return
        page.open[rid] = sid
        self.requests[rid] = page

    def _on_output(self, out, touched: dict[int, list[int]]) -> None:
        page = self.requests.get(out.request_id)
        if page is None:
            return
        sid = page.open.get(out.request_id)
        if sid is None:
            return
        if out.num_cached_tokens is not None and page.graph[sid].generated == 0:
            page.cached += out.num_cached_tokens or 0
            page.prompt_tokens += len(out.prompt_token_ids or [])
        comp = out.outputs[0]
        s = page.graph[sid]
        new = list(comp.token_ids)
        if new:
            touched.setdefault(page.pid, []).append(sid)
        taken = 0
        for token in new:
            if not s.live:
                break
            self._extend(page, sid, token)
            taken += 1
        # one step gives a request its sampled token + the draft tokens vLLM accepted before it
        page.accepted += max(0, taken - 1)
        metrics = getattr(comp, "spec_decode_metrics", None)  # at finish, with per_request_spec_decode_metrics
        if metrics is not None:
            page.drafted += int(metrics.num_draft_tokens)
        if s.live and out.finished:  # vLLM stopped it for a reason of its own (e.g. max_model_len)
            page.graph.finish(sid, f"vllm: {comp.finish_reason}", cut=True)
            page.flags.append(f"cut: stream {sid} ({s.label}) stopped by vLLM ({comp.finish_reason}: "
                              f"{comp.stop_reason})")
        if not s.live:
            if not out.finished:
                self.engine.abort_request([out.request_id])
            del page.open[out.request_id]
            del self.requests[out.request_id]

    def _extend(self, page: _Page, sid: int, token: int) -> None:
        """Append one token; ends, forks and limits as the embedded engine applies them."""
        for fork in take_token(page.graph, sid, token, self.strategy, self.cfg.max_new_tokens, page.flags):
            self._fork(page, fork)

    def _fork(self, page: _Page, fork: Fork) -> None:
        g = page.graph
        if not may_fork(g, self.cfg.max_branches, page.flags):
            return
        child = g.fork(fork.parent, fork.at, fork.first, fork.label)
        self._submit(page, child.id)


# ---------------------------------------------------------------------- drafts
def drafting(strategy: Strategy) -> bool:
    return strategy.drafter is not None or strategy.prepare is not None


def _page_drafter(strategy: Strategy):
    """The strategy's drafter, unwrapped from an adaptive length cap (vLLM proposes fixed K)."""
    from treedec.engine.draft_length import AdaptiveLength

    d = strategy.drafter
    return d.inner if isinstance(d, AdaptiveLength) else d


def draft_refusal(strategy: Strategy, cfg: VLLMConfig) -> str | None:
    """Why `strategy`'s drafting cannot run on this backend (one line), None when it can:
    HSD's page drafts (`hsd`, `padoc_hsd`), exact acceptance, the backend's own proposer."""
    from treedec.drafters.page_drafts import PageDraftDrafter
    from treedec.engine.draft import accept_greedy
    from treedec.strategies.hsd import TwoStages

    name = repr(strategy.name)
    see = "run it with runtime=embedded (see treedec/runtimes/README.md)"
    if not isinstance(_page_drafter(strategy), PageDraftDrafter) or not isinstance(strategy.prepare, TwoStages):
        return (f"strategy {name} drafts with {type(strategy.drafter).__name__}, which has no vLLM proposer (only "
                f"HSD's page drafts have, served as linear chains): {see}")
    if strategy.acceptor is not accept_greedy:
        return (f"strategy {name} accepts drafts lossily (relaxed_threshold), vLLM's rejection sampler only exactly "
                f"(greedy): {see}")
    if cfg.speculative_config and dict(cfg.speculative_config).get("model") != PROPOSER:
        return (f"strategy {name} drafts through treedec's own custom_class proposer on runtime=vllm: leave "
                "runtime.speculative_config unset (num_speculative_tokens = strategy.max_depth)")
    if cfg.data_parallel_size > 1:
        return (f"strategy {name} runs on one vLLM engine here (data_parallel_size=1): the data-parallel workers "
                "rebuild the strategy by name and would lose its drafts")
    return None


def draft_engine_cfg(strategy: Strategy, cfg: VLLMConfig) -> VLLMConfig:
    """`cfg` with the page-draft proposer as vLLM's speculative method (K = the strategy's
    `max_depth`) and per-request draft counts reported."""
    from dataclasses import replace

    if cfg.speculative_config:  # already the proposer's (draft_refusal lets no other through)
        return cfg
    spec = {"method": "custom_class", "model": PROPOSER,
            "num_speculative_tokens": int(_page_drafter(strategy).matcher.max_depth)}
    return replace(cfg, speculative_config=spec,
                   engine_args={"per_request_spec_decode_metrics": "summary", **dict(cfg.engine_args)})


def write_drafts(engine, vlm: VLM, strategy: Strategy, samples: list) -> dict[str, dict]:
    """Draft every page (pipeline OCR, or the ground truth for `drafts=oracle`) and write the
    sequences to the engine's draft store; HSD's stage 1 (decoding the draft regions' crops
    to refine the drafts) is skipped here. Returns per-page figures, as `prepare` does."""
    import logging

    from treedec.strategies.hsd import model_drafts, model_grids

    prep, drafter = strategy.prepare, _page_drafter(strategy)
    pages = model_drafts(samples, prep.source, prep.cache_dir, model_grids(vlm, samples, prep.snap))
    if drafter is not strategy.drafter:
        logging.getLogger(__name__).warning(
            "%s on runtime=vllm: draft_len=adaptive is the embedded engine's; vLLM proposes up to "
            "num_speculative_tokens = strategy.max_depth (%d) tokens per step", strategy.name, drafter.matcher.max_depth)
    if drafter.matcher.fuzzy:
        logging.getLogger(__name__).warning(
            "%s on runtime=vllm: fuzzy draft matching is the embedded engine's; vLLM's proposer matches exactly",
            strategy.name)
    if drafter.layout == "lines":
        logging.getLogger(__name__).warning(
            "%s on runtime=vllm: layout=lines (drafting the root stream line by line) is the embedded engine's; "
            "vLLM's proposer matches it n-gram-wise", strategy.name)
    if prep.stage1:
        logging.getLogger(__name__).warning(
            "%s on runtime=vllm: HSD stage 1 (decoding the draft regions' crops) is skipped; the %s drafts are "
            "verified as they are, as linear chains by vLLM's custom_class speculative decoding",
            strategy.name, prep.source)
    m = drafter.matcher
    seqs = page_draft_sequences([pages[s.name] for s in samples if s.name in pages], vlm.tokenizer, drafter.form,
                                vlm.prompt_ids(strategy.mode), m.w_max)
    engine.treedec_drafts.write(seqs, m.w_min, m.w_max)
    return {name: {"draft_source": prep.source, "stage1_steps": 0, "stage1_crops": 0} for name in pages}


# ---------------------------------------------------------------------- parse_pages
def parse_pages_vllm(vlm: VLM, strategy: Strategy, samples: Iterable, cfg: Any = None,
                     model_path: str | Path | None = None, progress: bool = True, warmup: bool = True):
    """`treedec.runner.parse_pages` on vLLM: the same `RunResult` of `PageRecord`s (steps =
    engine steps in which the page had a request running, prefill included)."""
    from treedec.runner import RunResult, _record, split_readable

    cfg = VLLMConfig.from_cfg(cfg)
    samples = list(samples)
    if drafting(strategy):  # HSD: page drafts through vLLM's speculative decoding (vllm_drafts.py)
        why = draft_refusal(strategy, cfg)
        if why:
            raise UserError(why)
        cfg = draft_engine_cfg(strategy, cfg)
    if cfg.data_parallel_size > 1:
        return _parse_pages_dp(vlm, strategy, samples, cfg, model_path, progress, warmup)
    from tqdm import tqdm

    records, items = split_readable(samples, lambda s: s.image)
    engine = get_engine(serving_dir(vlm, model_path), cfg, len(vlm.prompt_ids(strategy.mode)))
    t_draft = time.perf_counter()
    before = write_drafts(engine, vlm, strategy, samples) if drafting(strategy) else {}
    t_draft = time.perf_counter() - t_draft  # drafting (pipeline OCR) is on the pages' path: in wall time
    try:
        if warmup and items:
            list(VLLMRunner(engine, vlm, strategy, cfg).run(items[:1]))
        engine.reset_prefix_cache()  # no page starts warm from an earlier run: figures stay comparable
        runner = VLLMRunner(engine, vlm, strategy, cfg)
        bar = tqdm(total=len(items), desc=f"{strategy.name} (vllm)", unit="page", disable=not progress)
        t0 = time.perf_counter()
        for r in runner.run(items):
            records[r.name] = _record(r, strategy)
            records[r.name].extra = {**before.get(r.name, {}), **runner.cache_figures.pop(r.name, {})}
            bar.update(1)
        wall = time.perf_counter() - t0 + t_draft
        bar.close()
    finally:
        if drafting(strategy):
            engine.treedec_drafts.clear()  # no later run on this engine sees these pages' drafts
    result = RunResult(strategy.name, [records[s.name] for s in samples], wall, runner.forward_passes)
    result.prefix_cache = {"prompt_tokens": runner.prompt_tokens, "cached_tokens": runner.cached_tokens}  # type: ignore[attr-defined]
    return result


def _dp_worker(args):
    """One data-parallel rank: its own engine on its share of the pages."""
    model_dir, strategy_name, samples, cfg, progress, warmup = args
    import torch

    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(int(cfg.threads))

    vlm = VLM.load(model_dir)
    strategy = STRATEGIES.get(strategy_name)(vlm.tokenizer)
    return parse_pages_vllm(vlm, strategy, samples, cfg, model_path=model_dir, progress=progress, warmup=warmup)


def _parse_pages_dp(vlm, strategy, samples, cfg: VLLMConfig, model_path, progress, warmup):
    """`data_parallel_size` engines in spawned processes, pages dealt round robin; wall
    time is the slowest rank's (ranks start together), forward passes are summed."""
    import multiprocessing as mp
    from dataclasses import replace

    from treedec.runner import RunResult

    n = cfg.data_parallel_size
    model_dir = serving_dir(vlm, model_path)
    rank_cfg = replace(cfg, data_parallel_size=1)
    shards = [samples[i::n] for i in range(n)]
    with mp.get_context("spawn").Pool(n) as pool:
        parts = pool.map(_dp_worker, [(str(model_dir), strategy.name, shard, rank_cfg, progress and i == 0, warmup)
                                      for i, shard in enumerate(shards) if shard])
    by_name = {r.name: r for part in parts for r in part.records}
    return RunResult(strategy.name, [by_name[s.name] for s in samples], max(p.wall_s for p in parts),
                     sum(p.forward_passes for p in parts))
