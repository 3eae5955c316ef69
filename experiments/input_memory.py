"""Peak memory of `python -m treedec run data=images` against the number of pages.

Makes a 1536x2048 scan-like page (text lines drawn with PIL), links it N times into a
folder (each link is read and decoded on its own), runs `run` on it in a child process
per N and reads that child's peak RSS (os.wait4). Pages are read lazily, so the peak
should not grow with N.

    python experiments/input_memory.py --pages 10 1000 [--tree DIR] [--out /work/scratch/x]

`--tree` runs another checkout (e.g. one where all pages are loaded up front) for contrast.
Uses model=random (tiny) and a few new tokens per page: it measures the input path, not a model."""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw

TINY = ["model=random", "model.spec.image_size=128", "model.spec.text_layers=1", "model.spec.vision_layers=1",
        "model.spec.vision_hidden=64", "model.spec.vision_heads=1", "model.spec.text_hidden=64", "model.spec.head_dim=32",
        "runtime.max_new_tokens=4", "runtime.threads=1", "timelines=0"]


def scan(path: Path, size=(1536, 2048), seed: int = 0) -> None:
    rng = random.Random(seed)
    im = Image.new("RGB", size, (250, 249, 245))
    d = ImageDraw.Draw(im)
    y = 120
    while y < size[1] - 120:
        x = 120
        while x < size[0] - 160:
            w = rng.randint(20, 90)
            d.rectangle([x, y, x + w, y + 14], fill=(30, 30, 30))
            x += w + 12
        y += rng.choice([28, 28, 28, 60])
    im.save(path)


def folder(n: int, base: Path) -> Path:
    d = base / f"pages{n}"
    d.mkdir(parents=True, exist_ok=True)
    src = base / "scan.png"
    if not src.exists():
        scan(src)
    for i in range(n):
        p = d / f"page{i:05d}.png"
        if not p.exists():
            try:
                os.link(src, p)
            except OSError:
                p.write_bytes(src.read_bytes())
    return d


def peak_rss(n: int, base: Path, tree: Path, extra: list[str]) -> dict:
    out = base / f"run{n}"
    cmd = [sys.executable, "-m", "treedec", "run", *TINY, "data=images", f"data.root={folder(n, base)}", f"out={out}",
           *extra]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    s = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    return {"pages": n, "exit": os.waitstatus_to_exitcode(status), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "pages_done": s.get("pages"), "wall_s": round(time.time() - t0, 1),
            "error": err.strip().splitlines()[-1] if status and err.strip() else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("extra", nargs="*", help="more run overrides, e.g. runtime.max_pages=4")
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="input_memory_"))
    rows = [peak_rss(n, base, a.tree, a.extra) for n in a.pages]
    for r in rows:
        print(json.dumps(r))
    if len(rows) > 1 and rows[0]["peak_rss_mb"]:
        print(f"peak RSS {rows[-1]['pages']} vs {rows[0]['pages']} pages: "
              f"{rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f}x")


if __name__ == "__main__":
    main()
