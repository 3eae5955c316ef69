"""`python -m treedec depth`: oracle depth of every page of a data set, and the page
statistics that drive it. Synthetic pages default to the model's page distribution, as in
`run` (the shipped model's unless model.path names another), so both see the same pages."""
from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from treedec.data import SynthDataset, open_dataset
from treedec.models.loader import checkpoint_path
from treedec.models.vlm import checkpoint_pages, vlm_tokenizer
from treedec.report.plots import depth_histograms
from treedec.results.depth import page_stats, quartiles, stats_table, summarize
from treedec.run.outputs import RunOutput
from treedec.strategies.base import build_strategy


def model_pages(model_cfg) -> dict | None:
    """The page distribution `run` would take from the model `model_cfg` names (its treedec.json
    `pages`; square pages of its image size for model=random), read without loading weights."""
    if model_cfg is None:
        return None
    if model_cfg.get("name") == "random":
        size = model_cfg.spec.image_size
        return {"width": size, "height": size}
    path = checkpoint_path(model_cfg)
    return checkpoint_pages(path) if path.is_dir() else None


def depth_tokenizer(path: str | None):
    """treedec's character tokenizer, or the BPE at `path` with treedec's tokens added."""
    if not path:
        return vlm_tokenizer()
    from treedec.models.bpe_tokenizer import bpe_tokenizer

    return bpe_tokenizer(path)


def depth_dataset(cfg, render: bool = False):
    """The data set `depth` measures: `cfg.data`, synthetic knobs left unset from the model's pages."""
    return open_dataset(cfg.data, render=render, model_pages=model_pages(cfg.get("model")))


def main(cfg, out: RunOutput) -> dict:
    strategy = build_strategy(cfg.strategy, depth_tokenizer(cfg.get("tokenizer")))
    data = depth_dataset(cfg)
    rows = []
    for sample in tqdm(data, total=len(data), desc="depth", unit="page"):
        if sample.page is None:
            out.page(sample.name, {"flags": ["no ground truth"]})
            continue
        r = page_stats(sample.page, strategy)
        rows.append(r)
        out.page(sample.name, r)
    if not rows:
        from treedec.errors import UserError

        raise UserError(f"data set {cfg.data.name} has no annotated pages; depth needs ground truth")
    seq_q, fork_q, red_q = (quartiles(r[k] for r in rows) for k in ("sequential_depth", "fork_depth", "reduction"))
    summary = {
        "pages": len(rows), "data": cfg.data.name, "strategy": strategy.name,
        "median_sequential_depth": seq_q[1], "median_fork_depth": fork_q[1], "median_reduction": red_q[1],
        "iqr_sequential_depth": [seq_q[0], seq_q[2]], "iqr_fork_depth": [fork_q[0], fork_q[2]],
        "iqr_reduction": [red_q[0], red_q[2]],
        "aggregate_reduction": 1 - sum(r["fork_depth"] for r in rows) / sum(r["sequential_depth"] for r in rows),
        "mean_sequential_depth": float(np.mean([r["sequential_depth"] for r in rows])),
        "mean_fork_depth": float(np.mean([r["fork_depth"] for r in rows])),
        "tokenizer": str(cfg.tokenizer) if cfg.get("tokenizer") else "treedec char-level",
        "page_stats": summarize(rows),  # quartiles [q1, median, q3] of the figures that drive depth
    }
    if isinstance(data, SynthDataset):  # generated pages: the generator's knobs
        from dataclasses import asdict

        summary["page_config"] = asdict(data.config)
    depth_histograms(rows, out.dir / "depth_hist.png")
    t = Table(title=f"Oracle depth, {strategy.name} vs sequential, {cfg.data.name}, {len(rows)} pages "
                    "(tokens = forward steps)")
    for c in ("", "median", "IQR"):
        t.add_column(c)
    t.add_row("sequential depth", f"{seq_q[1]:.0f}", f"{seq_q[0]:.0f}-{seq_q[2]:.0f}")
    t.add_row(f"{strategy.name} depth", f"{fork_q[1]:.0f}", f"{fork_q[0]:.0f}-{fork_q[2]:.0f}")
    t.add_row("reduction", f"{100 * red_q[1]:.1f}%", f"{100 * red_q[0]:.1f}-{100 * red_q[2]:.1f}%")
    Console().print(t)
    Console(width=100).print(stats_table({cfg.data.name: summary["page_stats"]}, "Page statistics (tokens)"))
    return summary
