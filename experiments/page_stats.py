"""Real pages vs synthetic pages, side by side: the statistics that drive decoding depth
(regions per page, content tokens per region by kind, columns, layout tokens per region,
shares of tables and formulas) and the oracle padoc reduction, for each data set named.

    python experiments/page_stats.py                         # real demo pages vs presets v2, v2_model
    python experiments/page_stats.py --presets base v1 v2 --pages 200 --json out.json

Tokens are treedec's (one per character, HTML table tags one each), so tokens = steps."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from treedec.data import open_dataset
from treedec.models.vlm import vlm_tokenizer
from treedec.results.depth import page_stats, stats_table, summarize
from treedec.strategies.base import STRATEGIES

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "omnidocbench_demo"


def dataset_stats(data_cfg: dict, strategy: str = "padoc") -> dict:
    """Quartiles of the depth statistics over the pages of a `data` config (annotated pages only)."""
    s = STRATEGIES.get(strategy)(vlm_tokenizer())
    rows = [page_stats(x.page, s) for x in open_dataset(data_cfg, render=False) if x.page is not None]
    return {**summarize(rows), "pages": [len(rows)] * 3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=str(REAL), help="an OmniDocBench folder (default ../shared/omnidocbench_demo)")
    ap.add_argument("--presets", nargs="*", default=["v2", "v2_model"], help="synthetic page presets")
    ap.add_argument("--pages", type=int, default=200, help="synthetic pages per preset (held-out seeds)")
    ap.add_argument("--strategy", default="padoc")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    summaries = {}
    if Path(args.real).is_dir():
        summaries["real"] = dataset_stats({"name": "omnidocbench", "root": args.real}, args.strategy)
    for p in args.presets:
        summaries[p] = dataset_stats({"name": "synth", "pages": args.pages, "page": {"preset": p}}, args.strategy)
    Console(width=60 + 26 * len(summaries)).print(stats_table(summaries, f"Depth statistics ({args.strategy} oracle)"))
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
