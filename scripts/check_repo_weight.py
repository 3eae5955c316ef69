"""The repository stays light: no tracked file over 50 MB, the shipped weights
(*.safetensors under treedec/assets) under 80 MB in all and in half precision (fp16 or
bf16: scripts/half_weights.py; the loaders compute in float32), and no training history tracked
(`training_history.jsonl`, anywhere: a shipped model brings a plot and a summary,
scripts/ship_model.sh). Run by the test suite (tests/test_repo_weight.py); exits 1 naming
each file over a limit.

    python scripts/check_repo_weight.py
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MB = 1_000_000
MAX_FILE = 50 * MB
MAX_WEIGHTS = 80 * MB
WEIGHTS_UNDER = "treedec/assets/"
FULL = {"F32", "F64"}  # full-precision floats: shipped weights store F16 or BF16 instead
HISTORY = "training_history.jsonl"  # a training run's full curve: kept beside the run, not in git
ROOT = Path(__file__).resolve().parents[1]


def tracked_sizes(root: Path = ROOT) -> dict[str, int]:
    """path -> size in bytes of every file git tracks in `root` (as in the working tree; a
    tracked file deleted there is left out)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    sizes = {}
    for name in out.decode().split("\0"):
        path = root / name
        if name and path.is_file() and not path.is_symlink():
            sizes[name] = path.stat().st_size
    return sizes


def shipped(name: str) -> bool:
    return name.startswith(WEIGHTS_UNDER) and name.endswith(".safetensors")


def stored_dtypes(path: Path) -> set[str]:
    """The dtypes of a safetensors file's tensors as stored ("F32", "F16", ...), read by safetensors."""
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        return {f.get_slice(k).get_dtype() for k in f.keys()}


def problems(sizes: dict[str, int], dtypes: dict[str, set[str]] | None = None) -> list[str]:
    """One line per limit broken. `dtypes`: the stored dtypes of shipped weight files (by name)."""
    out = [f"{name}: {size / MB:.1f} MB, over the {MAX_FILE // MB} MB limit for a tracked file"
           for name, size in sorted(sizes.items()) if size > MAX_FILE]
    weights = {n: s for n, s in sizes.items() if shipped(n)}
    total = sum(weights.values())
    if total > MAX_WEIGHTS:
        out.append(f"shipped weights {total / MB:.1f} MB in all, over the {MAX_WEIGHTS // MB} MB limit: "
                   + ", ".join(f"{n} {s / MB:.1f} MB" for n, s in sorted(weights.items())))
    out += [f"{name}: stored as {', '.join(sorted(d & FULL))}; ship weights in half precision "
            f"(python scripts/half_weights.py {name})"
            for name, d in sorted((dtypes or {}).items()) if shipped(name) and d & FULL]
    out += [f"{name}: a training history is not tracked (ship a plot and a summary: scripts/ship_model.sh)"
            for name in sorted(sizes) if Path(name).name == HISTORY]
    return out


def main() -> int:
    sizes = tracked_sizes()
    found = problems(sizes, {n: stored_dtypes(ROOT / n) for n in sizes if shipped(n)})
    for line in found:
        print(line)
    weights = sum(s for n, s in sizes.items() if shipped(n))
    print(f"{len(sizes)} tracked files, {sum(sizes.values()) / MB:.1f} MB; largest "
          f"{max(sizes.values(), default=0) / MB:.1f} MB; shipped weights {weights / MB:.1f} MB"
          + ("" if not found else f"; {len(found)} over a limit"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
