"""Store safetensors weights in half precision (float16), in place: every float32 or float64
tensor rounded to fp16; bf16 and integer tensors and the file's metadata kept. What a shipped model
is committed as (scripts/check_repo_weight.py); treedec's loaders compute in float32 (the
weights are upcast on loading), so only storage changes.

    python scripts/half_weights.py FILE.safetensors [...]
"""
from __future__ import annotations

import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def halve(path: str) -> tuple[int, int]:
    """Rewrite `path` with its float32/float64 tensors in fp16; (tensors changed, tensors in all)."""
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    changed = {k for k, t in tensors.items() if t.dtype in (torch.float32, torch.float64)}  # bf16 stays
    if changed:
        save_file({k: (t.half() if k in changed else t).contiguous() for k, t in tensors.items()}, path, metadata=meta)
    return len(changed), len(tensors)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    for p in sys.argv[1:]:
        n, total = halve(p)
        print(f"{p}: {n} of {total} tensors stored in fp16")
