"""Where does each strategy break even with sequential, by model size? A PROJECTION from one
measured forced sweep, labelled so; the measured size is its check.

Under forcing a run's counts do not depend on the model's size (`treedec.engine.forward_log`: steps
by rows and pages, attention score elements, prefill tokens), nor do the engine's own seconds
(drafting, acceptance, bookkeeping) or the rest (reading pages, drafting before decoding,
writing). Only the forwards' time does. So, per job of the sweep and per size S, the job's
counts are projected as its run projected itself (`treedec.results.cost_model`), with the times of a
forced model of size S (random weights, the job's own prompt mode and pages) taken here:

    wall(S)   = model(S) + engine + other            (engine, other: measured in the job)
    model(S)  = sum over the job's (rows, pages) buckets of steps x t_S(bucket)
              + p_S x prefill tokens + q_S x prefill attention elements      (in CPU seconds)
                / the job's measured CPU share over its forwards                (to wall seconds)
    t_S:      the buckets that held 80 % of the job's step forwards (8 to 48 of them,
              `treedec.results.cost_model.timed_buckets`; the 8 with the most steps until 2026-12-03)
              timed at their mean pages, rows and keys (`treedec.results.cost_model.step_probe`: the
              engine's own step on a KV arena of that size); the other buckets by a line fitted
              on those and 5 steps around the job's mean
    p_S, q_S: prefills of the job's first 3 page prompts, timed

Each probe is built, timed and freed alone (`calibrate(apart=True)`: at 0.5b one bucket of 12
pages x 4.4 k keys is a 12 GB arena), so run it on a quiet machine, alone. pages/s(S) = pages /
wall(S), each strategy against sequential at the same S and level. With the vision encoder
(`vit` columns; the runs leave it out, `treedec/models/forced.py`): every prefill's image also
goes through Qwen3-VL-2B/4B's ViT (24 layers, hidden 1024, MLP 4096, 16 heads, full attention;
random weights, transformers' `Qwen3VLVisionModel`), timed here at three patch counts and fitted
as alpha x patches + beta x patches^2, projected from the run's prefills (4 patches per image
token: patches = 4 x prefill tokens, sum of patches^2 = 32 x prefill attention elements): pages,
crops and HSD's stage-1 crops each encoded once, as a real run would. At the sweep's own size the
projection is set beside the measured pages/s (`check`), so its error there is shown, not
assumed. Assumed: steps, rows and acceptance do not change with size (forced), the machine and
threads are those of the sweep, the vision encoder is left out unless in the `vit` columns.

The first version fitted one line a + b x rows + c x attention elements on a fixed grid for
every step; its check failed (2026-12-03, at 0.1b: +93 % padoc, +24 % padoc_hsd, +136 %
sequential: it missed small-row and long-KV steps), so it times the job's own buckets now.

    python experiments/break_even.py --sweep runs/exp-forced-0.1b-both [--sizes 30m 0.1b 0.5b]
        [--baseline sequential] [--budget 30] [--out runs/break_even]
        [--device cuda --dtype bfloat16 --data-root .demo]

On another machine (`--device`, `--dtype`, `--data-root`: a GPU's, experiments/device_forced.sh's
PROJECT step) the forwards and the ViT are timed there (wall seconds on a GPU) while the engine's
own seconds and the rest stay those the sweep measured on its machine: labelled so in the JSON.

Writes break_even.json and break_even.png (pages/s ratio to sequential against size, a line per
strategy and level; measured ratios marked) and prints the table, with each row's break-even: the
size where its ratio crosses 1, log-interpolated between the two sizes around it (`break_even_params`;
with the ViT, `break_even_params_with_vit`), none where it does not cross. Memory: the model of the
largest size plus one bucket's arena (0.5b and 1.5b: 28 layers x 8 KV heads x 128 x 2 x 4 bytes
= 229 kB a key in fp32).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

VIT_SIDES = (16, 32, 48)  # patches per side of the ViT's timed images (256, 1024, 2304 patches)


def jobs(sweep: Path) -> list[dict]:
    """Every job of a sweep with its cost model: strategy, level, pages, measured figures, its config."""
    from recalibrate import read_job

    out = []
    for path in sorted(sweep.rglob("summary.json")):
        s, cfg = read_job(path.parent)
        cm = s.get("cost_model")
        if not cm or not cm.get("counts"):
            continue
        level = s.get("concurrency")
        out.append({"job": str(path.parent.relative_to(sweep)), "strategy": s["strategy"], "in_flight": level,
                    "pages": s["pages"], "pages_per_s": s["pages_per_s"],
                    "projected_pages_per_s": s.get("projected_pages_per_s"), "counts": cm["counts"],
                    "wall_s": cm["wall_s"],
                    "text_edit": s.get("text_edit"), "median_steps": s.get("median_steps"),
                    "mean_steps": s.get("mean_steps"), "cfg": cfg})
    if not out:
        raise SystemExit(f"break_even.py: no summary.json with a cost model under {sweep}")
    return out


def size_costs(found: list[dict], size: str, budget_s: float, overrides: dict | None = None) -> dict[str, dict]:
    """Per job of `found`: `treedec.results.cost_model.calibrate`'s times for its counts with a forced model
    of `size` (the job's own config otherwise: pages, prompt mode, threads; `overrides` replaced,
    e.g. the device and dtype), each probe alone."""
    import gc

    from treedec.engine.forward_log import ForwardLog
    from recalibrate import load_job_model, recalibrate

    vlm, samples = load_job_model(found[0]["cfg"], size, overrides)
    memo, out = {}, {}
    for j in found:
        out[j["job"]] = recalibrate(vlm, samples, j["cfg"], ForwardLog(**j["counts"]), j["in_flight"],
                                    budget_s=budget_s, apart=True, memo=memo)
        print(f"  {size} {j['job']}: {out[j['job']]['calibration_s']:.0f} s of probes", flush=True)
    del vlm, samples
    gc.collect()
    return out


def fit_vit(threads: int, budget_s: float, device: str = "cpu", dtype: str = "float32") -> dict:
    """alpha (per patch) and beta (per patch squared), seconds (CPU seconds on a CPU), of Qwen3-VL-2B's
    vision encoder (random weights) on this machine's `device` in `dtype`."""
    import torch
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    from treedec.results.cost_model import _fit, _timed

    torch.set_num_threads(threads)
    cfg = Qwen3VLVisionConfig(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048,
                              deepstack_visual_indexes=[5, 11, 17])
    cfg._attn_implementation = "sdpa"
    dev = torch.device(device)
    with dev:
        model = Qwen3VLVisionModel(cfg).to(getattr(torch, dtype)).eval()
    per_patch = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size ** 2
    probes = []
    for side in VIT_SIDES:
        x = torch.randn(side * side, per_patch, device=dev, dtype=getattr(torch, dtype))
        grid = torch.tensor([[1, side, side]], device=dev)

        def run(x=x, grid=grid):
            with torch.inference_mode():
                model(x, grid_thw=grid)
        probes.append(run)
    times = _timed(probes, dev, budget_s, rounds=2)
    n = [side * side for side in VIT_SIDES]
    alpha, beta = _fit([[k, k * k] for k in n], times)
    return {"model": "Qwen3-VL-2B/4B vision encoder (24 x 1024, MLP 4096, full attention), random weights",
            "per_patch_s": alpha, "per_patch_sq_s": beta,
            "points": [{"patches": k, "time_s": t} for k, t in zip(n, times)]}


def vit_s(job: dict, vit: dict) -> float:
    """CPU seconds of the vision encoder on every image the job prefilled (see the module)."""
    n = job["counts"]
    return vit["per_patch_s"] * 4 * n["prefill_tokens"] + vit["per_patch_sq_s"] * 32 * n["prefill_attn"]


def projected(job: dict, costs: dict, vit: dict | None = None) -> float:
    """The job's pages/s with its forwards at `costs`' size (`treedec.results.cost_model.project` on its
    counts), and the vision encoder's time on its images with `vit` (CPU seconds, turned to wall
    seconds by the job's CPU share as the forwards are)."""
    from treedec.engine.forward_log import ForwardLog
    from treedec.results.cost_model import project

    cm = project(ForwardLog(**job["counts"]), costs, job["pages"], job["wall_s"])["cost_model"]
    wall = cm["projected_wall_s"] + (vit_s(job, vit) / (cm["cpu_share"] or 1.0) if vit else 0.0)  # None: wall clock
    return job["pages"] / wall


def params(size: str) -> float:
    from treedec.models.forced import SIZES

    return SIZES[size].params


def break_even(ratio: dict[str, float], sizes: list[str]) -> float | None:
    """The size (parameters) where `ratio` (size -> ratio to the baseline) crosses 1 (`crossing`)."""
    return crossing([(params(s), ratio[s]) for s in sizes])


def millions(n: float | None) -> str:
    """A break-even for the table: '-' where there is none."""
    return "-" if n is None else f"{n / 1e6:.0f} M"


def crossing(points: list[tuple[float, float]]) -> float | None:
    """The size (parameters) where a ratio crosses 1 between two projected sizes, log-interpolated; None if never."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if (y0 - 1) * (y1 - 1) < 0:
            f = (1 - y0) / (y1 - y0)
            return math.exp(math.log(x0) + f * (math.log(x1) - math.log(x0)))
    return None


def plot(rows: list[dict], sizes: list[str], measured_at: str | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [params(s) for s in sizes]
    for r in rows:
        if r["strategy"] == r["baseline"]:
            continue
        line, = ax.plot(xs, [r["ratio"][s] for s in sizes], marker="o", label=f"{r['strategy']} @{r['in_flight']}")
        if r.get("ratio_with_vit"):
            ax.plot(xs, [r["ratio_with_vit"][s] for s in sizes], ls="--", color=line.get_color(), lw=0.9)
        if measured_at and r.get("measured_ratio") is not None:
            ax.plot([params(measured_at)], [r["measured_ratio"]], marker="*", ms=12, color=line.get_color())
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.minorticks_off()  # the log axis's own minor labels would overlap the sizes' names
    ax.set_xticks(xs, sizes)
    ax.set_xlabel("decoder size (non-embedding parameters)")
    ax.set_ylabel("pages/s x sequential (same size, level)")
    ax.set_title("PROJECTED from one forced sweep's counts (star: measured; dashed: with Qwen3-VL-2B's ViT, "
                 "projected)", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    from omegaconf import OmegaConf

    from treedec.models.device import model_device

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path, required=True, help="a forced sweep's folder (its jobs' summary.json)")
    ap.add_argument("--sizes", nargs="+", default=["30m", "0.1b", "0.5b"])
    ap.add_argument("--measured-size", default=None, help="the sweep's model.size (its check); read from a job's config")
    ap.add_argument("--baseline", default="sequential")
    ap.add_argument("--threads", type=int, default=2, help="threads of the ViT's timing (the steps': the jobs')")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds of timing per job and size (probes alone)")
    ap.add_argument("--no-vit", action="store_true", help="leave the vision encoder's projection out")
    ap.add_argument("--device", default=None, help="time the probes there (e.g. cuda; default: the jobs' model.device); "
                    "given, or --dtype: no check against the sweep's measurement (another machine)")
    ap.add_argument("--dtype", default=None, help="the probes' dtype (e.g. bfloat16; default: the jobs' model.dtype)")
    ap.add_argument("--data-root", default=None, help="the jobs' pages from this folder (another machine's copy)")
    ap.add_argument("--out", type=Path, default=Path("runs/break_even"))
    a = ap.parse_args()
    model = {k: v for k, v in (("device", a.device), ("dtype", a.dtype)) if v is not None}
    overrides = {**({"model": model} if model else {}), **({"data": {"root": a.data_root}} if a.data_root else {})}
    found = jobs(a.sweep)
    # probes on another device or in another dtype: the sweep's measurement is no check of them
    measured_at = None if model else a.measured_size or _size_of(found)
    sizes = sorted(set(a.sizes) | ({measured_at} if measured_at else set()), key=params)
    costs = {s: size_costs(found, s, a.budget, overrides) for s in sizes}  # size -> job -> calibrate's times
    model_cfg = OmegaConf.merge(found[0]["cfg"], overrides).model  # the probes' model: the ViT runs as it does
    device = str(model_device(model_cfg.get("device")))
    dtype = model_cfg.get("dtype") or "float32"
    vit = None if a.no_vit else fit_vit(a.threads, a.budget, device, dtype)
    if vit:
        print(f"ViT: {vit['per_patch_s']:.3g} s/patch, {vit['per_patch_sq_s']:.3g} s/patch^2", flush=True)
    rows = []
    for j in found:
        base = next((b for b in found if b["strategy"] == a.baseline and b["in_flight"] == j["in_flight"]), None)
        if base is None:
            continue
        rate = {s: projected(j, costs[s][j["job"]]) for s in sizes}
        ratio = {s: rate[s] / projected(base, costs[s][base["job"]]) for s in sizes}
        row = {"strategy": j["strategy"], "in_flight": j["in_flight"], "baseline": a.baseline, "pages": j["pages"],
               "mean_steps_ratio": base["mean_steps"] / j["mean_steps"] if j["mean_steps"] else None,
               "median_steps_ratio": base["median_steps"] / j["median_steps"] if j["median_steps"] else None,
               "projected_pages_per_s": rate, "ratio": ratio,
               **({"vit_s_per_page": vit_s(j, vit) / j["pages"],
                   "ratio_with_vit": {s: projected(j, costs[s][j["job"]], vit) / projected(base, costs[s][base["job"]], vit)
                                      for s in sizes}}
                  if vit else {}),
               "break_even_params": break_even(ratio, sizes)}
        if vit:
            row["break_even_params_with_vit"] = break_even(row["ratio_with_vit"], sizes)
        if measured_at:
            row.update(measured_pages_per_s=j["pages_per_s"], measured_ratio=j["pages_per_s"] / base["pages_per_s"],
                       check_error=rate[measured_at] / j["pages_per_s"] - 1)
        rows.append(row)
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"sweep": str(a.sweep), "measured_size": measured_at, "sizes": sizes, "threads": a.threads,
            "device": device, "dtype": dtype,
            "kind": "PROJECTION from the sweep's counts and measured engine/other seconds (the sweep's machine: "
                    "drafting, bookkeeping, reading and writing as they ran there), each job's buckets and "
                    "prefills timed per size here",
            "costs": costs, "vit": vit}
    (a.out / "break_even.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    plot(rows, sizes, measured_at, a.out / "break_even.png")
    print(f"{'strategy':<12} {'@':>3} " + " ".join(f"{s:>7}" for s in sizes) +
          f" {'measured':>9} {'check':>7} {'break-even':>11}" + ("  with ViT: " + " ".join(f"{s:>7}" for s in sizes)
                                                                  + f" {'break-even':>11}" if vit else ""))
    for r in sorted(rows, key=lambda r: (r["in_flight"] or 0, r["strategy"])):
        print(f"{r['strategy']:<12} {r['in_flight']!s:>3} " + " ".join(f"{r['ratio'][s]:>7.2f}" for s in sizes) +
              (f" {r['measured_ratio']:>9.2f} {r['check_error']:>+7.1%} " if "measured_ratio" in r
               else f" {'-':>9} {'-':>7} ") +
              f"{millions(r['break_even_params']):>11}" +
              ("            " + " ".join(f"{r['ratio_with_vit'][s]:>7.2f}" for s in sizes)
               + f" {millions(r.get('break_even_params_with_vit')):>11}" if vit else ""))
    print(f"wrote {a.out}/break_even.json, break_even.png (ratios: pages/s x {a.baseline}, PROJECTED; "
          + (f"measured and check at {measured_at})" if measured_at else "no check: probes on another device or dtype)"))


def _size_of(found: list[dict]) -> str | None:
    """The model.size the sweep's jobs `found` ran at (their config), if one."""
    sizes = {j["cfg"].model.get("size") for j in found}
    sizes.discard(None)
    return sizes.pop() if len(sizes) == 1 else None


if __name__ == "__main__":
    main()
