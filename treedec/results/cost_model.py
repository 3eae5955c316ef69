"""The cost model, asked for with `cost_model=true`: `projected_pages_per_s` beside
`pages_per_s`, checked against the run's own measurement.

A run's wall time, split by what decides it:

    wall   = model + engine + other
    model  = sum over row counts r of steps(r) x t(r)       (the forwards of every step; r: rows and pages)
           + p x prefill tokens + q x prefill attention      (every prefill: pages, crops, stage 1)
    t(r)   = a step's time at r's rows and pages and the run's mean keys there: timed for the
             buckets that held most of the run's step forwards (`timed_buckets`); for the others
             a + b x rows + c x attention, fitted with a, b, c >= 0 on every timed step (those
             buckets and a grid around the run's mean)
    engine = the engine's own time in its steps and admissions outside the forwards (drafting per step, an
             MTP head, acceptance, bookkeeping), measured
    other  = everything outside the engine's passes (reading pages, drafting before decoding,
             writing), measured

The counts (steps by rows, attention score elements, prefill tokens; `treedec.engine.forward_log`)
are the run's own, every engine of the run included (HSD's stage 1, the crops' engines); under
a forced model they do not depend on the model's size. The times are calibrated in the same
process right after the run (`calibrate`: 5 % of the run's forward time, 2 to 60 s): forwards
of the run's model on a random KV arena, and prefills of the run's own first page prompts
(which hold the vision encoder where the model has one), called in turn, round after round,
so that a burst of load falls on all of them. A step's time need not be linear in its rows
(docs/forced.md, the cost model), hence the timed row counts.

So `projected_pages_per_s` checks the step-cost model against the real forwards: the engine
and other times are measured, and the projection's error is the model's (`model_s` projected
against `model_measured_s`, both in `cost_model`). On a CPU the times are counted in the
process's CPU seconds (`model_work_s` against `model_work_measured_s`), which a shared
machine's other processes stretch less than wall seconds, and turned into wall seconds by the
run's share of the CPU over its forwards (`cpu_share`, measured); on a GPU, in wall seconds.
To project another size or machine, keep the counts and the measured engine and other
seconds, and calibrate the times there. The calibration's seconds are `calibration_s`, not in `wall_s`.
"""
from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import numpy as np
import torch

from treedec.engine.engine import EngineConfig
from treedec.engine.malloc import hold_freed_memory
from treedec.engine.forward_log import ForwardLog

STEP_GRID = ((1.0, 1.0), (0.5, 1.0), (2.0, 1.0), (1.0, 0.5), (1.0, 2.0))  # (rows, keys) x the run's mean
TIMED_SHARE = 0.8  # the buckets timed hold this share of the run's step forwards (`timed_buckets`) ...
TIMED_MIN = 8  # ... and are at least this many
TIMED_MAX = 48  # ... and at most this many
ARENAS_TOGETHER = 4 << 30  # bytes of probe KV arenas that may be held at once; above, each probe is timed apart
LONG_S = 10.0  # a probe's call this long needs no untimed warm-up (`_timed_apart`)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _clock(device: torch.device):
    """What a cost is counted in: a GPU's wall seconds; on a CPU, the process's CPU seconds, which
    other processes on a shared machine do not stretch (its wall seconds they do, by the run's
    share of the CPU, measured over its forwards: `project`)."""
    return time.perf_counter if device.type == "cuda" else time.process_time


def _once(fn, device: torch.device, clock) -> float:
    """`clock`'s seconds of one call of `fn`, the device waited for before and after."""
    _sync(device)
    t = clock()
    fn()
    _sync(device)
    return clock() - t


def _timed(probes: list, device: torch.device, budget_s: float, rounds: int = 3) -> list[float]:
    """Median seconds (`_clock`'s) of each of `probes` (callables), called in turn, round after
    round, for at least `rounds` rounds and `budget_s` wall seconds (after one untimed round): a
    burst of load on a shared machine then falls on every probe alike, not on one."""
    clock, times = _clock(device), [[] for _ in probes]
    for fn in probes:
        fn()
    t0 = time.perf_counter()
    while len(times[0]) < rounds or time.perf_counter() - t0 < budget_s:
        for fn, ts in zip(probes, times):
            ts.append(_once(fn, device, clock))
    return [statistics.median(ts) for ts in times]


def _timed_apart(makers: list, device: torch.device, budget_s: float, rounds: int = 3) -> list[tuple[float, Any]]:
    """`_timed` for probes that do not fit in memory together: each of `makers` (callables returning
    (probe, what it built)) is built, timed alone and freed before the next. Its first call is
    untimed unless it took over `LONG_S` (a long call needs no warm-up, and a second would cost as
    much); then at least one timed call, at most `rounds`, within its share of `budget_s`."""
    clock, out = _clock(device), []
    for make in makers:
        fn, built = make()
        first = _once(fn, device, clock)
        ts, t0 = ([first] if first > LONG_S else []), time.perf_counter()
        while len(ts) < rounds and (not ts or time.perf_counter() - t0 < budget_s / len(makers)):
            ts.append(_once(fn, device, clock))
        out.append((statistics.median(ts), built))
        del fn
        gc.collect()
    return out


def _fit(xs: list[list[float]], ts: list[float]) -> list[float]:
    """Least-squares coefficients of t = x . coef (minimum norm where the points do not tell them apart)."""
    coef, *_ = np.linalg.lstsq(np.array(xs, dtype=float), np.array(ts, dtype=float), rcond=None)
    return [float(c) for c in coef]


def fit_steps(points: list[dict]) -> tuple[float, float, float]:
    """(a, b, c) of a step's time a + b x rows + c x attention elements, each >= 0 (a step costs no less
    for more rows or keys), least squares on timed steps (`rows`, `attention`, `time_s`): the timed
    buckets and the grid around the run's mean, columns scaled alike for nnls's absolute tolerance."""
    from scipy.optimize import nnls

    x = np.array([[1.0, d["rows"], d["attention"]] for d in points])
    scale = np.abs(x).max(axis=0)  # columns of like size: nnls's tolerance is absolute
    scale[scale == 0] = 1.0
    coef, _ = nnls(x / scale, np.array([d["time_s"] for d in points], dtype=float))
    a, b, c = (float(v) for v in coef / scale)
    return a, b, c


def timed_buckets(log: ForwardLog) -> list[str]:
    """The buckets whose steps are timed: by their steps' forward CPU seconds in the run (their rows
    where a log has no times), most first, until they hold `TIMED_SHARE` of all, at least `TIMED_MIN`
    and at most `TIMED_MAX` of them; a line fitted on them stands for the others."""
    cpu = log.by_rows_forward_cpu_s
    by_cpu = bool(cpu) and cpu.keys() == log.by_rows.keys() and sum(cpu.values()) > 0
    weight = {b: float(cpu[b] if by_cpu else v[2]) for b, v in log.by_rows.items()}
    total, held, out = sum(weight.values()), 0.0, []
    for b in sorted(weight, key=lambda b: -weight[b]):
        if len(out) >= TIMED_MAX or (len(out) >= TIMED_MIN and held >= TIMED_SHARE * total):
            break
        out.append(b)
        held += weight[b]
    return out


def step_share(log: ForwardLog, buckets) -> float | None:
    """The share of the run's step forwards (its CPU seconds) that `buckets` held; None where the
    log has no bucket times."""
    total = sum(log.by_rows_forward_cpu_s.values())
    chosen = {str(b) for b in buckets}
    return sum(v for b, v in log.by_rows_forward_cpu_s.items() if str(b) in chosen) / total if total else None


def probe_blocked(adapter, pages: int, dense_waste: float, blocked: bool | None = None) -> bool:
    """Whether a probe step of `pages` pages takes page-blocked attention, by the engine's rule: never
    for one page (the dense mask is its block) or a model without it (`supports_blocks`); else
    `blocked`, or (None) once there are more pages than `dense_waste`."""
    if pages <= 1 or not adapter.supports_blocks:
        return False
    return pages > dense_waste if blocked is None else bool(blocked)


def step_probe(adapter, pages: int, rows: int, keys: int, dense_waste: float, blocked: bool | None = None):
    """(one step as a callable, attention elements it hands to the kernels): `pages` pages of
    `keys` KV slots each, `rows` rows in all, page-blocked attention
    if `blocked` (None: the engine's choice, blocked once the dense mask would hand over
    `dense_waste` x the real elements; here: more pages than `dense_waste`)."""
    from treedec.engine.kv import KVArena
    from treedec.engine.step_attention import Span, dense_mask, page_batch, page_slots

    cfg = adapter.text_config
    dev = next(adapter.model.parameters()).device
    per = [rows // pages + (p < rows % pages) for p in range(pages)]  # rows per page, `rows` in all
    arena = KVArena()
    shape = (1, cfg.num_key_value_heads, pages * keys + rows, cfg.head_dim)  # room for the step's rows:
    with torch.inference_mode():  # the step then writes in place, never doubling the buffer
        for layer in range(cfg.num_hidden_layers):
            arena.cache.update(torch.randn(shape, dtype=adapter.dtype, device=dev),
                               torch.randn(shape, dtype=adapter.dtype, device=dev), layer)
    for p in range(pages):
        arena.reserve(keys, p)
    base = arena.size

    def rewind():  # the cache back to the pages' keys; the slots past them are the step's room
        for layer in arena.cache.layers:
            layer.size = base
            layer._views()
    rewind()
    slots = page_slots(arena.owner, base)
    starts = [sum(per[:p]) for p in range(pages)]
    spans = [Span(p, starts[p], per[p], None, slots[p]) for p in range(pages) if per[p]]
    n = rows
    ids = torch.randint(10, cfg.vocab_size, (n,))
    pos = torch.cat([torch.arange(keys, keys + r) for r in per])
    keep = torch.arange(n)
    blocked = probe_blocked(adapter, pages, dense_waste, blocked)
    batch = page_batch(spans, slots, base) if blocked else None
    mask = None if blocked else dense_mask(spans, base, n)

    def step():
        adapter.step(ids, pos, mask, arena.cache, keep=keep, pages=batch) if blocked else \
            adapter.step(ids, pos, mask, arena.cache, keep=keep)
        rewind()

    return step, batch.padded if blocked else n * (base + n)


def calibrate(vlm, mode: str, samples, log: ForwardLog, pages: int, dense_waste: float = EngineConfig.dense_waste,
              budget_s: float | None = None, apart: bool = False, memo: dict | None = None) -> dict[str, Any]:
    """The step times t(r) and costs a, b, c (steps), p, q (prefills) of `log`'s model on this machine, now
    (see the module), for the prompt `mode` of the run's `samples`. `pages`: the run's pages in
    flight. `budget_s`: how long to time (default: 5 % of the run's forwards, 2 to 60 s).
    `apart`: time each probe alone and free its KV arena before the next (`_timed_apart`: for a
    model whose probes do not fit in memory together; chosen as well where their arenas would hold
    over `ARENAS_TOGETHER` bytes; else they are timed in turn, round after round).
    `memo`: probe -> (seconds, what it built), shared by calls on one model: a probe timed once."""
    t0 = time.perf_counter()
    hold_freed_memory()  # as the engine holds it: the probes' temporaries allocated as the run's were
    adapter = vlm.adapter()
    dev = next(adapter.model.parameters()).device
    costs: dict[str, Any] = {"clock": "wall" if dev.type == "cuda" else "cpu"}
    probes = _Probes(adapter, pages, dense_waste)
    if log.steps:
        costs["timed_share"] = _add_steps(probes, log)
    if log.prefills:
        _add_prefills(probes, vlm, mode, samples)
    budget = budget_s if budget_s is not None else min(60.0, max(2.0, 0.05 * log.forward_s))
    memo = {} if memo is None else memo
    costs["timed_apart"] = _time_probes(probes, dev, budget, apart, memo)
    costs.update(_fitted(probes, memo))
    costs["calibration_s"] = time.perf_counter() - t0
    return costs


class _Probes:
    """The probes `calibrate` times: `makers` (() -> (probe, what it built)) and beside each its
    `kinds` entry (kind, its figures, memo key)."""

    def __init__(self, adapter, pages: int, dense_waste: float):
        self.adapter, self.pages, self.dense_waste = adapter, pages, dense_waste
        self.makers: list = []
        self.kinds: list = []

    def add_step(self, kind: str, pages: float, rows: float, keys: float, blocked: bool | None = None,
                 **extra) -> None:
        """A step of `rows` rows over `pages` pages, `keys` attention elements a row (a dense step's
        span the arena (every page), a blocked step's its page); `blocked`: None for the engine's rule."""
        P = max(1, min(self.pages, round(pages), round(rows)))
        blocked = probe_blocked(self.adapter, P, self.dense_waste, blocked)
        r, k = max(P, round(rows)), max(8, round(keys / (1 if blocked else P)))

        def make(P=P, r=r, k=k, blocked=blocked):
            fn, attn = step_probe(self.adapter, P, r, k, self.dense_waste, blocked=blocked)
            return fn, {"attention": attn}
        self.makers.append(make)
        self.kinds.append((kind, {"pages": P, "rows": r, "keys_per_page": k, "blocked": blocked, **extra},
                           ("step", P, r, k, blocked)))

    def add_prefill(self, prompt) -> None:
        self.makers.append(lambda: ((lambda: self.adapter.prefill(prompt)), {}))
        self.kinds.append(("prefill", {"tokens": len(prompt.ids)}, ("prefill", len(prompt.ids))))

    def arena_bytes(self, todo: list[int]) -> int:
        """Bytes of the KV arenas of the step probes `todo` (`step_probe`'s buffers: the pages' keys
        and the step's rows)."""
        text = self.adapter.text_config
        slot = 2 * text.num_hidden_layers * text.num_key_value_heads * text.head_dim * self.adapter.dtype.itemsize
        steps = [self.kinds[i][2][1:4] for i in todo if self.kinds[i][2][0] == "step"]  # (pages, rows, keys a page)
        return sum((P * k + r) * slot for P, r, k in steps)


def _add_steps(probes: _Probes, log: ForwardLog) -> float | None:
    """The buckets that held most step time, each at its steps' mean pages and keys; a grid around
    the run's mean for the rest. The share of the step forwards the buckets held (`step_share`)."""
    marked = any(str(b).endswith("b") for b in log.by_rows)  # a log whose keys mark blocked steps (older: none)
    buckets = timed_buckets(log)
    for b in buckets:
        n, pg, rw, at = log.by_rows[b]
        # beside the probe's time: what the run's own steps of the bucket cost (CPU seconds a step), to see where
        # a projection misses
        cpu = log.by_rows_forward_cpu_s.get(b)
        probes.add_step("bucket", pg / n, rw / n, at / rw, blocked=str(b).endswith("b") if marked else None,
                        bucket=b, run_cpu_s=cpu / n if cpu is not None else None)
    rows, keys, P = log.step_rows / log.steps, log.step_attn / log.step_rows, log.step_pages / log.steps
    if len(buckets) < len(log.by_rows):
        for fr, fk in STEP_GRID:
            probes.add_step("step", P, fr * rows, fk * keys)
    return step_share(log, buckets)


def _add_prefills(probes: _Probes, vlm, mode: str, samples, n: int = 3) -> None:
    """Prefills of the run's first `n` page prompts (those with an image)."""
    for s in samples:
        if s.image is not None:
            probes.add_prefill(vlm.prompt(s.image, mode))
        if sum(k == "prefill" for k, *_ in probes.kinds) == n:
            break


def _time_probes(probes: _Probes, dev: torch.device, budget: float, apart: bool, memo: dict) -> bool:
    """Time the probes not in `memo` yet and put them there: together, round after round, or each
    apart (asked, or where their arenas would hold over `ARENAS_TOGETHER` bytes). Whether apart."""
    todo = [i for i, (_, _, key) in enumerate(probes.kinds) if key not in memo]
    apart = apart or probes.arena_bytes(todo) > ARENAS_TOGETHER
    if apart:
        timed = _timed_apart([probes.makers[i] for i in todo], dev, budget)
    else:
        built = [probes.makers[i]() for i in todo]
        timed = list(zip(_timed([fn for fn, _ in built], dev, budget) if built else [], [d for _, d in built]))
    for i, got in zip(todo, timed):
        memo[probes.kinds[i][2]] = got
    return apart


def _fitted(probes: _Probes, memo: dict) -> dict[str, Any]:
    """The timed points by kind and the costs fitted on them: a, b, c on the steps, p, q on the prefills."""
    points = [(k, {**d, **memo[key][1]}, memo[key][0]) for k, d, key in probes.kinds]
    steps = [(d, t) for k, d, t in points if k == "step"]
    prefills = [(d, t) for k, d, t in points if k == "prefill"]
    out: dict[str, Any] = {"bucket_points": [{**d, "time_s": t} for k, d, t in points if k == "bucket"]}
    if steps:
        out["step_points"] = [{**d, "time_s": t} for d, t in steps]
        out["per_step_s"], out["per_row_s"], out["per_attention_s"] = fit_steps(
            out["bucket_points"] + out["step_points"])
    if prefills:
        out["per_prefill_token_s"], out["per_prefill_attention_s"] = _fit(
            [[d["tokens"], d["tokens"] * (d["tokens"] + 1) / 2] for d, _ in prefills], [t for _, t in prefills])
        out["prefill_points"] = [{**d, "time_s": t} for d, t in prefills]
    return out


def project(log: ForwardLog, costs: dict[str, Any], pages: int, wall_s: float) -> dict[str, Any]:
    """`projected_pages_per_s` and its parts (`cost_model`) for a run of `pages` decoded pages
    whose passes are `log` and wall time `wall_s`, under `costs` (`calibrate`'s)."""
    timed = {str(d["bucket"]): d["time_s"] for d in costs.get("bucket_points", [])}
    rest = [v for b, v in log.by_rows.items() if str(b) not in timed]  # JSON keys are strings
    work = (sum(v[0] * timed[str(b)] for b, v in log.by_rows.items() if str(b) in timed)
            + sum(costs.get("per_step_s", 0.0) * v[0] + costs.get("per_row_s", 0.0) * v[2]
                  + costs.get("per_attention_s", 0.0) * v[3] for v in rest)
            + costs.get("per_prefill_token_s", 0.0) * log.prefill_tokens
            + costs.get("per_prefill_attention_s", 0.0) * log.prefill_attn)
    cpu = costs.get("clock") == "cpu"
    measured = log.forward_cpu_s if cpu else log.forward_s
    share = measured / log.forward_s if cpu and log.forward_s else 1.0  # CPU s per wall s over the run's forwards
    model = work / share if share else work
    engine = log.engine_s - log.forward_s
    other = wall_s - log.engine_s
    wall = model + engine + other
    return {"projected_pages_per_s": pages / wall if wall > 0 else None,
            "cost_model": {"model_s": model, "model_measured_s": log.forward_s, "engine_s": engine, "other_s": other,
                           "projected_wall_s": wall, "wall_s": wall_s, "clock": costs.get("clock"),
                           "model_work_s": work, "model_work_measured_s": measured, "cpu_share": share if cpu else None,
                           "counts": log.figures(), "costs": costs}}
