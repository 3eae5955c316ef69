"""Where a whole run's time went, from a cProfile of it: the attention kernel, the copy that gathers
each page's KV for page-blocked attention, the weights' matrix products and the rest, each as
seconds and as a share of the run (docs/forced_step_cost.md).

    python -m cProfile -o runs/seq.prof -m treedec run model=forced model.size=30m data=omnidocbench \
        runtime.max_pages=16 strategy=sequential runtime.max_new_tokens=12000 cost_model=false out=runs/prof/sequential
    python experiments/profile_shares.py runs/seq.prof [runs/padoc.prof ...]

The gather is `index_select` called from `treedec.models.page_attention._gather` (the same
operator elsewhere, e.g. picking a bucket's query rows, counts as "other"). cProfile adds its own
cost to every Python call, so the shares, not the seconds, are the figures to compare. Profile
with `cost_model=false`: the cost model's calibration times probe steps whose kernels would
count in the parts above (a profile that holds it says so in its table)."""
from __future__ import annotations

import argparse
import pstats
import sys
from pathlib import Path

PARTS = ("attention kernel", "KV gather", "weights' matmuls", "other")
CALIBRATION = "of which the cost model's calibration"


def _is(key, name: str, file_end: str = "~") -> bool:
    return key[2].endswith(name) and key[0].endswith(file_end)


def shares(path: Path) -> dict[str, float]:
    """Seconds by part (PARTS) and 'total', from one cProfile output."""
    st = pstats.Stats(str(path))
    out = dict.fromkeys(PARTS, 0.0)
    for key, (_, _, tt, _, callers) in st.stats.items():
        if _is(key, "scaled_dot_product_attention>"):
            out["attention kernel"] += tt
        elif _is(key, "'index_select' of 'torch._C.TensorBase' objects>"):
            gather = sum(c[2] for ck, c in callers.items() if ck[2] == "_gather" and ck[0].endswith("page_attention.py"))
            out["KV gather"] += gather
            out["other"] += tt - gather
        elif _is(key, "torch._C._nn.linear>"):
            out["weights' matmuls"] += tt
        else:
            out["other"] += tt
    out["total"] = st.total_tt
    out[CALIBRATION] = sum(v[3] for k, v in st.stats.items() if _is(k, "calibrate", "cost_model.py"))
    return out


def table(paths: list[Path]) -> str:
    """Markdown: a row a part, a column a profile (seconds and share of the run)."""
    cols = [shares(p) for p in paths]
    lines = ["| part | " + " | ".join(p.stem for p in paths) + " |", "|---" * (len(paths) + 1) + "|"]
    for part in (*PARTS, "total", *([CALIBRATION] if any(c[CALIBRATION] for c in cols) else [])):
        lines.append(f"| {part} | " + " | ".join(f"{c[part]:.1f} s ({c[part] / c['total']:.1%})" for c in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profiles", nargs="+", type=Path, help="cProfile outputs (python -m cProfile -o FILE ...)")
    a = ap.parse_args(argv)
    for p in a.profiles:
        if not p.is_file():
            sys.exit(f"profile_shares.py: no profile {p}")
    try:
        print(table(a.profiles))
    except (EOFError, ValueError, TypeError) as e:  # not a cProfile output
        sys.exit(f"profile_shares.py: not a cProfile output ({e})")


if __name__ == "__main__":
    main()
