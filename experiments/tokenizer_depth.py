"""What the character tokenizer does to the steps ratios, against a real VLM's BPE: the oracle
(model-free) depth of each page under treedec's character tokenizer (the forced model's: one token a
character) and under Qwen's byte-level BPE with treedec's control tokens added (a Qwen-based parser
fine-tuned on treedec's format), for sequential and each forked strategy, on the same pages.

    python experiments/tokenizer_depth.py                      # the 12 demo pages, Qwen's BPE
    python experiments/tokenizer_depth.py --bpe PATH --out runs/tokenizer_depth

Qwen's BPE is `qwen.tiktoken` (151,643 tokens, the vocabulary Qwen2 and Qwen3 kept), taken from the
pinned dashscope wheel on PyPI (`pip download`, no other network; its sha256 checked) unless --bpe
names a tokenizer (a .tiktoken file, a tokenizer.json or a checkpoint directory). Writes
tokenizer_depth.json (every page's figures), tokenizer_depth.md and tokenizer_depth.png to --out."""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from treedec.data import open_dataset
from treedec.models.bpe_tokenizer import ROW_TAGS, bpe_tokenizer
from treedec.models.forced import wide_charset
from treedec.models.vlm import vlm_tokenizer
from treedec.results.depth import page_stats
from treedec.strategies.base import STRATEGIES

ROOT = Path(__file__).resolve().parents[1]
DASHSCOPE, MEMBER = "dashscope==2.0.2", "dashscope/resources/qwen.tiktoken"
SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"


def qwen_tiktoken(cache: Path) -> Path:
    """Qwen's rank file, from the pinned dashscope wheel (downloaded once into `cache`)."""
    path = cache / "qwen.tiktoken"
    if not path.is_file():
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, "-m", "pip", "download", DASHSCOPE, "--no-deps", "-q", "-d", d], check=True)
            with zipfile.ZipFile(next(Path(d).glob("*.whl"))) as z:
                data = z.read(MEMBER)
        if hashlib.sha256(data).hexdigest() != SHA256:
            sys.exit(f"{DASHSCOPE}'s {MEMBER} is not the file this script was checked with (sha256 differs)")
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def page_rows(pages, tokenizers: dict, strategies: list[str]) -> list[dict]:
    """Per page and tokenizer: content and layout tokens, sequential depth, each strategy's depth."""
    rows = []
    for name, page in pages:
        row = {"page": name, "language": (page.info.get("page_attribute") or {}).get("language", "unknown")}
        for tk, (plain, rows_tok) in tokenizers.items():
            for s in strategies:
                st = page_stats(page, STRATEGIES.get(s)(rows_tok if s == "table_rows" else plain))
                row[f"{tk}:{s}"] = st["fork_depth"]
                if s == strategies[0]:  # the same for every strategy (the flat form, the regions)
                    row.update({f"{tk}:sequential": st["sequential_depth"], f"{tk}:content": st["content_tokens"],
                                f"{tk}:layout": st["layout_tokens"]})
        rows.append(row)
    return rows


def summary(rows: list[dict], tokenizers: list[str], strategies: list[str]) -> dict:
    """For each tokenizer: content tokens per layout token (pooled), and per strategy the median and
    mean of per-page depths, the steps ratios to sequential they give (median/median, mean/mean) and
    the median per-page reduction (the papers' figure); then BPE / character content tokens by the
    pages' language (OmniDocBench's page attribute)."""
    out = {}
    for tk in tokenizers:
        seq = np.array([r[f"{tk}:sequential"] for r in rows], float)
        s = {"content_per_layout": sum(r[f"{tk}:content"] for r in rows) / sum(r[f"{tk}:layout"] for r in rows),
             "content_tokens": sum(r[f"{tk}:content"] for r in rows), "layout_tokens": sum(r[f"{tk}:layout"] for r in rows),
             "sequential": {"median": float(np.median(seq)), "mean": float(seq.mean())}}
        for st in strategies:
            d = np.array([r[f"{tk}:{st}"] for r in rows], float)
            s[st] = {"median": float(np.median(d)), "mean": float(d.mean()),
                     "median_reduction": float(np.median(1 - d / seq)),
                     "x_fewer_median": float(np.median(seq) / np.median(d)), "x_fewer_mean": float(seq.mean() / d.mean())}
        out[tk] = s
    out["bpe_over_char_content"] = {}  # per page language: [min, pooled, max] over its pages
    for lang in sorted({r["language"] for r in rows}):
        of = [r for r in rows if r["language"] == lang]
        each = [r[f"{tokenizers[1]}:content"] / r[f"{tokenizers[0]}:content"] for r in of]
        pooled = sum(r[f"{tokenizers[1]}:content"] for r in of) / sum(r[f"{tokenizers[0]}:content"] for r in of)
        out["bpe_over_char_content"][lang] = {"pages": len(of), "min": min(each), "pooled": pooled, "max": max(each)}
    return out


def markdown(s: dict, strategies: list[str], pages: int) -> str:
    char, bpe = s["char"], s["bpe"]
    lines = [f"Oracle steps on {pages} pages, treedec's character tokenizer vs Qwen's BPE (treedec's tokens added)", "",
             "| | char | BPE | BPE / char |", "|---|---|---|---|",
             f"| content tokens | {char['content_tokens']} | {bpe['content_tokens']} | "
             f"{bpe['content_tokens'] / char['content_tokens']:.3f} |",
             f"| layout tokens | {char['layout_tokens']} | {bpe['layout_tokens']} | "
             f"{bpe['layout_tokens'] / char['layout_tokens']:.3f} |",
             f"| content tokens per layout token | {char['content_per_layout']:.2f} | {bpe['content_per_layout']:.2f} | "
             f"{bpe['content_per_layout'] / char['content_per_layout']:.3f} |"]
    for st in ("sequential", *strategies):
        lines.append(f"| {st}: median / mean steps | {char[st]['median']:.0f} / {char[st]['mean']:.0f} | "
                     f"{bpe[st]['median']:.0f} / {bpe[st]['mean']:.0f} | "
                     f"{bpe[st]['median'] / char[st]['median']:.3f} / {bpe[st]['mean'] / char[st]['mean']:.3f} |")
    for st in strategies:
        lines.append(f"| {st}: x fewer steps than sequential, median / mean | {char[st]['x_fewer_median']:.2f} / "
                     f"{char[st]['x_fewer_mean']:.2f} | {bpe[st]['x_fewer_median']:.2f} / {bpe[st]['x_fewer_mean']:.2f} | "
                     f"{bpe[st]['x_fewer_median'] / char[st]['x_fewer_median']:.3f} / "
                     f"{bpe[st]['x_fewer_mean'] / char[st]['x_fewer_mean']:.3f} |")
    for st in strategies:
        lines.append(f"| {st}: median per-page reduction of steps | {100 * char[st]['median_reduction']:.1f} % | "
                     f"{100 * bpe[st]['median_reduction']:.1f} % | |")
    by = "; ".join(f"{lang} ({v['pages']} pages) {v['pooled']:.2f} [{v['min']:.2f}-{v['max']:.2f}]"
                   for lang, v in s["bpe_over_char_content"].items())
    lines += ["", f"BPE / character content tokens by page language, pooled [per-page range]: {by}"]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], strategies: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(strategies), figsize=(3.6 * len(strategies) + 1, 3.9), squeeze=False,
                             layout="constrained")
    for ax, st in zip(axes[0], strategies):
        x = [r["char:sequential"] / r[f"char:{st}"] for r in rows]
        y = [r["bpe:sequential"] / r[f"bpe:{st}"] for r in rows]
        ax.scatter(x, y, c=[r["bpe:content"] / r["char:content"] for r in rows], cmap="viridis", vmin=0, vmax=1)
        top = max(x + y) * 1.05
        ax.plot([1, top], [1, top], color="grey", lw=0.7, ls="--", label="same ratio")
        ax.set_xlabel("x fewer steps, character tokenizer")
        ax.set_ylabel("x fewer steps, Qwen BPE")
        ax.set_title(st)
        ax.legend(loc="upper left")
    fig.colorbar(axes[0][-1].collections[0], ax=axes[0].tolist(), label="BPE / character content tokens")
    fig.suptitle("Oracle steps ratio to sequential per page (under the dashes: less with BPE)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "omnidocbench_demo"), help="an OmniDocBench folder")
    ap.add_argument("--bpe", default=None, help="a BPE tokenizer (default: Qwen's, from the dashscope wheel)")
    ap.add_argument("--strategies", nargs="+", default=["padoc", "table_rows", "crops"])
    ap.add_argument("--out", default="runs/tokenizer_depth")
    args = ap.parse_args()
    if not Path(args.data).is_dir():
        sys.exit(f"--data {args.data}: no such folder")
    unknown = [s for s in args.strategies if s not in STRATEGIES.names()]
    if unknown:
        sys.exit(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES.names())}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bpe = args.bpe or qwen_tiktoken(Path("runs") / "tokenizers")
    char = vlm_tokenizer(wide_charset())
    tokenizers = {"char": (char, char), "bpe": (bpe_tokenizer(bpe), bpe_tokenizer(bpe, extra=ROW_TAGS))}
    pages = [(x.name, x.page) for x in open_dataset({"name": "omnidocbench", "root": args.data}, render=False)
             if x.page is not None]
    if not pages:
        sys.exit(f"--data {args.data}: no annotated pages")
    rows = page_rows(pages, tokenizers, args.strategies)
    s = summary(rows, list(tokenizers), args.strategies)
    table = markdown(s, args.strategies, len(rows))
    (out / "tokenizer_depth.json").write_text(json.dumps({"bpe": args.bpe or f"{MEMBER} of {DASHSCOPE}", "pages": rows, "summary": s}, indent=1))
    (out / "tokenizer_depth.md").write_text(table)
    plot(rows, args.strategies, out / "tokenizer_depth.png")
    print(table)
    print(f"wrote {out}/tokenizer_depth.json, .md, .png")


if __name__ == "__main__":
    main()
