"""Plot reading-probe curves: .venv/bin/python experiments/probes/plot_runs.py RUN [RUN ...] -> runs/reading_curves.png"""
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent / "runs"
names = sys.argv[1:] or sorted(p.stem for p in HERE.glob("*.csv"))
fig, ax = plt.subplots(1, 4, figsize=(20, 4))
for n in names:
    rows = list(csv.DictReader(open(HERE / f"{n}.csv")))
    if not rows:
        continue
    t = [float(r["wall_s"]) / 60 for r in rows]
    ax[0].plot(t, [float(r["eval_tf_l3"]) for r in rows], marker=".", label=n)
    ax[1].plot(t, [float(r["greedy_cer_l3"]) for r in rows], marker=".", label=n)
    ax[2].plot(t, [float(r["greedy_cer_l1"]) for r in rows], marker=".", label=n)
for n in names:
    import re
    pts = [(float(m.group(1)) / 60, float(m.group(2))) for l in open(HERE / f"{n}.log")
           if (m := re.match(r"step \d+ t=(\d+)s lvl=-?\d+ loss=\S+ tf_acc=(\S+)", l))]
    if pts:
        ax[3].plot(*zip(*pts), lw=1, label=n)
ax[3].set_title("train TF content acc (rolling 40 steps, current level)")
ax[0].set_title("teacher-forced content char acc (level 3 held-out)")
ax[1].set_title("greedy char error rate (level 3 held-out)")
ax[2].set_title("greedy char error rate (level 1 held-out)")
for a in ax:
    a.set_xlabel("wall-clock minutes (2 CPU cores)")
    a.grid(alpha=.3)
ax[1].set_ylim(0, 1.2)
ax[2].set_ylim(0, 1.2)
ax[0].legend(fontsize=7)
fig.tight_layout()
fig.savefig(HERE / "reading_curves.png", dpi=70)
print(HERE / "reading_curves.png")
