"""Training curves of `treedec train` runs side by side, from their checkpoints' per-step history
(OUT/checkpoints/last/trainer_state.pt): token accuracy, LM loss, and the grounding figures (reading
head's attention on the right glyph `steer_p`, its readout accuracy `readout_acc`), each averaged
over windows of --every steps; a table on stdout and, with --plot, a PNG.

    python experiments/probes/curves.py RUN_DIR [RUN_DIR ...] [--every 10] [--plot curves.png]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

KEYS = ("token_acc", "loss", "steer_p", "readout_acc")


def history(run: Path) -> list[dict]:
    return torch.load(run / "checkpoints" / "last" / "trainer_state.pt", weights_only=False, map_location="cpu")["history"]


def windows(rows: list[dict], every: int) -> list[dict]:
    """Mean of each key over steps (k-1)*every+1 .. k*every."""
    out = []
    for start in range(0, len(rows) - every + 1, every):
        chunk = rows[start:start + every]
        out.append({"step": chunk[-1]["step"],
                    **{k: sum(r[k] for r in chunk) / len(chunk) for k in KEYS if all(k in r for r in chunk)}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    curves = {run.name: windows(history(run), args.every) for run in args.runs}
    print("| run | steps | " + " | ".join(KEYS) + " |")
    print("|---|---|" + "---|" * len(KEYS))
    for name, rows in curves.items():
        for r in rows:
            cells = " | ".join(f"{r[k]:.3f}" if k in r else "-" for k in KEYS)
            print(f"| {name} | {r['step'] - args.every + 1}-{r['step']} | {cells} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(KEYS), figsize=(3.2 * len(KEYS), 2.8))
        for ax, key in zip(axes, KEYS):
            for name, rows in curves.items():
                ax.plot([r["step"] for r in rows if key in r], [r[key] for r in rows if key in r], marker=".", label=name)
            ax.set_title(key, fontsize=9)
            ax.set_xlabel("step", fontsize=8)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
