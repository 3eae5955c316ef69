"""Rebuild runs/NAME.csv from the EVAL lines of runs/NAME.log (for runs cut before their CSV was flushed)."""
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "runs"
for name in sys.argv[1:]:
    rows = [json.loads(l.split("EVAL ", 1)[1]) for l in open(HERE / f"{name}.log") if l.startswith("EVAL ")]
    with open(HERE / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(name, len(rows), "rows")
