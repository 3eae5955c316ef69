"""One command per comparison: `python experiments/sweep.py NAME [key=value ...]` runs the sweep
that `experiments/sweeps/NAME.yaml` describes into runs/exp-NAME (the results store: rerun to
resume, `+force=true` to recompute), then `compare` into runs/exp-NAME-compare (compare.md,
report.html). Extra key=value arguments replace the sweep's own for the same key (e.g.
data.pages=8 for a quick look) and send it to runs/exp-NAME-<hash of them>.
`python experiments/sweep.py` lists the sweeps."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def command_lines(name: str, extra: list[str]) -> list[list[str]]:
    path = HERE / "sweeps" / f"{name}.yaml"
    if not path.is_file():
        sys.exit(f"sweep.py: no sweep {name!r}; sweeps: {', '.join(sorted(p.stem for p in (HERE / 'sweeps').glob('*.yaml')))}")
    spec = yaml.safe_load(path.read_text())
    replaced = {e.partition("=")[0] for e in extra}
    own = [str(o) for o in spec["overrides"] if str(o).partition("=")[0] not in replaced]
    out = f"runs/exp-{name}" + (f"-{hashlib.sha256(' '.join(extra).encode()).hexdigest()[:8]}" if extra else "")
    sweep = [sys.executable, "-m", "treedec", spec["command"], "-m", *own, *extra, f"out={out}"]
    compare = [sys.executable, "-m", "treedec", "compare", f"runs={out}", f"out={out}-compare"]
    if spec.get("baseline"):
        compare.append(f"baseline={spec['baseline']}")
    return [sweep, compare]


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
