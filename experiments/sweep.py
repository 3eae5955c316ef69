"""One command per comparison: `python experiments/sweep.py NAME [key=value ...]` runs the sweep
that `experiments/sweeps/NAME.yaml` describes into runs/exp-NAME (the results store: rerun to
resume, `+force=true` to recompute), then `compare` into runs/exp-NAME-compare (compare.md,
report.html). Extra key=value arguments replace the sweep's own for the same key (e.g.
data.pages=8 for a quick look) and send it to runs/exp-NAME-<hash of them>; out=DIR sets the
store's folder (the table goes to DIR-compare).
A sweep's `overrides` is one Hydra sweep, or a list of them (`groups`, e.g. a baseline
alone and a strategy's own keys swept): each group's jobs go to a subfolder gN/ of the
same store, and `compare` makes one table of them all.
`python experiments/sweep.py` lists the sweeps."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def groups(spec: dict) -> list[list[str]]:
    """The sweep's Hydra sweeps: one list of overrides, or several."""
    overrides = spec["overrides"]
    return [list(g) for g in overrides] if all(isinstance(o, list) for o in overrides) else [list(overrides)]


def command_lines(name: str, extra: list[str]) -> list[list[str]]:
    """The sweep's command lines: one `treedec run|depth -m` per group, then `compare`."""
    path = HERE / "sweeps" / f"{name}.yaml"
    if not path.is_file():
        sys.exit(f"sweep.py: no sweep {name!r}; sweeps: {', '.join(sorted(p.stem for p in (HERE / 'sweeps').glob('*.yaml')))}")
    spec = yaml.safe_load(path.read_text())
    given = [e.partition("=")[2] for e in extra if e.startswith("out=")]
    extra = [e for e in extra if not e.startswith("out=")]
    replaced = {e.partition("=")[0] for e in extra}
    out = given[-1] if given else \
        f"runs/exp-{name}" + (f"-{hashlib.sha256(' '.join(extra).encode()).hexdigest()[:8]}" if extra else "")
    parts = groups(spec)
    lines = []
    for i, group in enumerate(parts):
        own = [str(o) for o in group if str(o).partition("=")[0] not in replaced]
        sub = [f"hydra.sweep.subdir=g{i}/${{hydra:job.override_dirname}}"] if len(parts) > 1 else []
        lines.append([sys.executable, "-m", "treedec", spec["command"], "-m", *own, *extra, *sub, f"out={out}"])
    compare = [sys.executable, "-m", "treedec", "compare", f"runs={out}", f"out={out}-compare"]
    if spec.get("baseline"):
        compare.append(f"baseline={spec['baseline']}")
    return [*lines, compare]


def main(argv: list[str]) -> None:
    if not argv:
        for p in sorted((HERE / "sweeps").glob("*.yaml")):
            print(f"{p.stem:<22} {p.read_text().splitlines()[0].lstrip('# ')}")
        return
    for cmd in command_lines(argv[0], argv[1:]):
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
