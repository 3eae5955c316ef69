"""The cost model, checked against measurement in every run: `projected_pages_per_s` beside
`pages_per_s` (issue 32.4).

A run's wall time, split by what decides it:

    wall = model + engine + other
    model  = a * steps + b * step rows + c * step attention      (the forwards of every step)
           + p * prefill tokens + q * prefill attention           (every prefill: pages, crops, stage 1)
    engine = the engine's own time in its passes outside the forwards (drafting per step, an
             MTP head, acceptance, bookkeeping), measured
    other  = everything outside the engine's passes (reading pages, drafting before decoding,
             writing), measured

The counts (steps, rows, attention score elements, prefill tokens; `treedec.engine.pass_log`)
are the run's own, every engine of the run included (HSD's stage 1, the crops' engines); under
a forced model they do not depend on the model's size. The costs a, b, c, p, q are calibrated
in the same process right after the run (`calibrate`, a few seconds: forwards of the run's
model on a random KV arena at the run's mean rows and keys per step, scaled 0.5x-2x, and
prefills of the run's own first page prompts, which hold the vision encoder where the model
has one). So `projected_pages_per_s` checks the step-cost model against the real forwards:
the engine and other times are measured, and the projection's error is the model's
(`model_s` projected against `model_measured_s`, both in `cost_model`). To project another
size or machine, keep the counts and the measured engine and other seconds, and calibrate
the costs there. The calibration's seconds are `calibration_s`, not in `wall_s`.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import torch

from treedec.engine.pass_log import PassLog

STEP_GRID = ((1.0, 1.0), (0.5, 1.0), (2.0, 1.0), (1.0, 0.5), (1.0, 2.0))  # (rows, keys) x the run's mean


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device: torch.device, reps: int) -> float:
    """Median seconds of `fn()` over `reps` calls after one untimed."""
    fn()
    times = []
    for _ in range(reps):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _fit(xs: list[list[float]], ts: list[float]) -> list[float]:
    """Least-squares coefficients of t = x . coef (minimum norm where the points do not tell them apart)."""
    coef, *_ = np.linalg.lstsq(np.array(xs, dtype=float), np.array(ts, dtype=float), rcond=None)
    return [float(c) for c in coef]


def step_point(adapter, pages: int, rows: int, keys: int, dense_waste: float, reps: int) -> tuple[float, int]:
    """(seconds, attention elements handed to the kernels) of one step: `pages` pages of `keys`
    KV slots each, `rows` rows in all, with the engine's choice of dense or page-blocked
    attention (blocked once the dense mask would hand over `dense_waste` x the real elements)."""
    from treedec.engine.kv import KVArena
    from treedec.engine.step_attention import Span, dense_mask, page_batch, page_slots

    cfg = adapter.text_config
    dev = next(adapter.model.parameters()).device
    per = max(1, rows // pages)
    arena = KVArena()
    shape = (1, cfg.num_key_value_heads, pages * keys, cfg.head_dim)
    with torch.inference_mode():
        for layer in range(cfg.num_hidden_layers):
            arena.cache.update(torch.randn(shape, dtype=adapter.dtype, device=dev),
                               torch.randn(shape, dtype=adapter.dtype, device=dev), layer)
    for p in range(pages):
        arena.reserve(keys, p)
    base = arena.size
    slots = page_slots(arena.owner, base)
    spans = [Span(p, p * per, per, None, slots[p]) for p in range(pages)]
    n = pages * per
    ids = torch.randint(10, cfg.vocab_size, (n,))
    pos = torch.arange(keys, keys + per).repeat(pages)
    keep = torch.arange(n)
    blocked = pages > 1 and pages > dense_waste
    batch = page_batch(spans, slots, base) if blocked else None
    mask = None if blocked else dense_mask(spans, base, n)
    attn = batch.padded if blocked else n * (base + n)

    def step():
        adapter.step(ids, pos, mask, arena.cache, keep=keep, pages=batch) if blocked else \
            adapter.step(ids, pos, mask, arena.cache, keep=keep)
        for layer in arena.cache.layers:  # back to the arena before the step
            layer.size = base
            layer._views()

    return _timed(step, dev, reps), attn


def calibrate(vlm, mode: str, samples, log: PassLog, pages: int, dense_waste: float = 4.0, reps: int = 5
              ) -> dict[str, Any]:
    """The costs a, b, c (steps) and p, q (prefills) of `log`'s model on this machine, now
    (see the module), for the prompt `mode` of the run's `samples`. `pages`: the run's pages in flight."""
    t0 = time.perf_counter()
    adapter = vlm.adapter()
    dev = next(adapter.model.parameters()).device
    costs: dict[str, Any] = {}
    if log.steps:
        rows, keys = log.step_rows / log.steps, log.step_attn / log.step_rows
        P = max(1, min(pages, round(log.step_pages / log.steps)))
        xs, ts, grid = [], [], []
        for fr, fk in STEP_GRID:
            r, k = P * max(1, round(fr * rows / P)), max(8, round(fk * keys / (1 if P > dense_waste else P)))
            s, attn = step_point(adapter, P, r, k, dense_waste, reps)
            xs.append([1.0, r, attn])
            ts.append(s)
            grid.append({"pages": P, "rows": r, "keys_per_page": k, "attention": attn, "s": s})
        costs["per_step_s"], costs["per_row_s"], costs["per_attention_s"] = _fit(xs, ts)
        costs["step_points"] = grid
    if log.prefills:
        prompts = []
        for s in samples:
            if getattr(s, "image", None) is not None:
                prompts.append(vlm.prompt(s.image, mode))
            if len(prompts) == 3:
                break
        xs, ts = [], []
        for pr in prompts:
            n = len(pr.ids)
            xs.append([n, n * (n + 1) / 2])
            ts.append(_timed(lambda: adapter.prefill(pr), dev, 1))
        costs["per_prefill_token_s"], costs["per_prefill_attention_s"] = _fit(xs, ts) if xs else (0.0, 0.0)
        costs["prefill_points"] = [{"tokens": int(x[0]), "s": t} for x, t in zip(xs, ts)]
    costs["calibration_s"] = time.perf_counter() - t0
    return costs


def project(log: PassLog, costs: dict[str, Any], pages: int, wall_s: float) -> dict[str, Any]:
    """`projected_pages_per_s` and its parts (`cost_model`) for a run of `pages` decoded pages
    whose passes are `log` and wall time `wall_s`, under `costs` (`calibrate`'s)."""
    model = (costs.get("per_step_s", 0.0) * log.steps + costs.get("per_row_s", 0.0) * log.step_rows
             + costs.get("per_attention_s", 0.0) * log.step_attn
             + costs.get("per_prefill_token_s", 0.0) * log.prefill_tokens
             + costs.get("per_prefill_attention_s", 0.0) * log.prefill_attn)
    engine = log.engine_s - log.forward_s
    other = wall_s - log.engine_s
    wall = model + engine + other
    return {"projected_pages_per_s": pages / wall if wall > 0 else None,
            "cost_model": {"model_s": model, "model_measured_s": log.forward_s, "engine_s": engine, "other_s": other,
                           "projected_wall_s": wall, "wall_s": wall_s, "counts": log.figures(), "costs": costs}}
