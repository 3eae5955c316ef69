"""Each output format's floor on OmniDocBench pages: the ground truth written in the format and
read back, scored as any prediction (`treedec.results.evaluate.format_floor`). Prints a Markdown table.

    PYTHONPATH=. python scripts/format_floors.py [GT_JSON]   # default: ../shared/omnidocbench_demo
"""
from __future__ import annotations

import sys
from pathlib import Path

from treedec.formats import FORMATS, get_format
from treedec.io import load_omnidocbench
from treedec.results.evaluate import format_floor

COLUMNS = ("text_edit", "text_edit_vs_truth", "table_teds", "reading_order_edit", "layout_f1", "pages_flagged")


def _cell(v) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def main(gt: Path) -> None:
    gts = load_omnidocbench(gt)
    print(f"| format | {' | '.join(COLUMNS)} | cannot express |")
    print("|" + "---|" * (len(COLUMNS) + 2))
    for name in FORMATS.names():
        fmt = get_format(name)
        floor = format_floor(gts, fmt)
        print(f"| {name} | {' | '.join(_cell(floor[c]) for c in COLUMNS)} | {'; '.join(fmt.cannot_express) or '-'} |")


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[1].parent / "shared" / "omnidocbench_demo" / "OmniDocBench_demo.json"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
