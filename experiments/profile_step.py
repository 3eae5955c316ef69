"""Where one engine step's time goes on this machine's device: a forced model's step (the
engine's own, `treedec.results.cost_model.step_probe`: `pages` pages of `keys` KV slots each, `rows`
rows in all, page-blocked or one dense mask) timed, then run under torch.profiler. Written for
the GPU, where a 0.5b step of 4-11 pages measured 154 ms (docs/forced.md, "The first GPU
call"): if the device's own time (Self CUDA total) is far below the step's wall time, the GPU
waits on the host (launches, syncs); if not, a kernel is the cost, named in the table.

    python experiments/profile_step.py --size 0.5b --device cuda --dtype bfloat16 \
        --probe 12:12:6000 --probe 1:1:10000 [--steps 5] [--tokenizer FILE] [--out runs/profile_step.txt]

A probe is PAGES:ROWS:KEYS (KEYS: slots a page). Prints, per probe and attention layout, the
step's median seconds (wall on a GPU, CPU seconds on a CPU) and the profiler's top operators
by self device time (on a CPU: self CPU time); `--out` keeps the same text. `--tokenizer`: the
forced model under a real VLM's BPE (`model.tokenizer`, docs/forced_tokenizer.md): its LM head has
that tokenizer's rows (Qwen's 151,676 against the character tokenizer's 25,391), which every row
of a step goes through.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def probe_text(adapter, pages: int, rows: int, keys: int, blocked: bool, steps: int, device) -> str:
    """One probe timed and profiled: its lines of text."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from treedec.engine.engine import EngineConfig
    from treedec.results.cost_model import _timed, step_probe

    fn, attn = step_probe(adapter, pages, rows, keys, EngineConfig.dense_waste, blocked=blocked)
    t = _timed([fn], device, budget_s=2.0)[0]
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            fn()
        if cuda:
            torch.cuda.synchronize(device)
    table = prof.key_averages().table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total", row_limit=18)
    head = (f"== {pages} pages x {keys} keys, {rows} rows, {'blocked' if blocked else 'dense'}: "
            f"{t * 1e3:.1f} ms a step ({'wall' if cuda else 'CPU'}), attention elements {attn}; profile of {steps} steps:")
    return head + "\n" + table


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="0.5b", help="a forced model size (treedec.models.forced.SIZES)")
    ap.add_argument("--device", default=None, help="default: cuda where torch sees one, else cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--probe", action="append", default=None, help="PAGES:ROWS:KEYS (repeatable; default 12:12:6000)")
    ap.add_argument("--steps", type=int, default=5, help="steps under the profiler a probe")
    ap.add_argument("--threads", type=int, default=None, help="torch's CPU threads (default: torch's)")
    ap.add_argument("--tokenizer", default=None, help="a BPE (tokenizer.json, checkpoint dir or .tiktoken; "
                    "default: the forced model's character tokenizer)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    probes = []
    for spec in a.probe or ["12:12:6000"]:
        try:
            pages, rows, keys = (int(x) for x in spec.split(":"))
        except ValueError:
            sys.exit(f"profile_step.py: --probe {spec!r}: PAGES:ROWS:KEYS, three integers")
        if min(pages, rows, keys) < 1 or rows < pages:
            sys.exit(f"profile_step.py: --probe {spec!r}: each >= 1 and at least a row a page")
        probes.append((pages, rows, keys))
    import torch

    from treedec.errors import UserError
    from treedec.models.forced import ForcedModel

    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        vlm = ForcedModel(a.size, dtype=a.dtype, device=a.device, tokenizer=a.tokenizer)
    except UserError as e:
        sys.exit(f"profile_step.py: {e}")
    adapter = vlm.adapter()
    device = next(adapter.model.parameters()).device
    lines = [f"forced {a.size} in {a.dtype} on {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}), "
             f"torch {torch.__version__}, tokenizer {a.tokenizer or 'character'} ({len(vlm.tokenizer)} tokens)"]
    print(lines[0], flush=True)
    for pages, rows, keys in probes:
        for blocked in ([True, False] if pages > 1 else [False]):
            text = probe_text(adapter, pages, rows, keys, blocked, a.steps, device)
            print(text, flush=True)
            lines.append(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text("\n".join(lines) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
