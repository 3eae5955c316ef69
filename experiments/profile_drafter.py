"""Where the pipeline drafter's CPU goes: CPU seconds per page and per stage (model loading,
layout model, text detection, orientation, recognition, fixed-pitch re-reading, tables,
formulas, reading order, the rules between them) on the OmniDocBench demo pages and on
synthetic pages of the shipped model's distribution, each set drafted by
`python -m treedec draft` in a process of its own (so `cpu_s_per_page` counts start-up:
imports, model loading, reading and writing pages), ONNX Runtime's thread counts stated.

    python experiments/profile_drafter.py                 # the 12 demo pages + 32 synthetic ones
    python experiments/profile_drafter.py --synth 4 --demo-limit 2 --ocr '{"det_side": 640}'
    # table on stdout and in OUT/profile_drafter.md; figures in OUT/profile_drafter.json

CPU seconds are this process's (`time.process_time`), not wall: still, run it on a quiet
machine (a loaded one slows caches and memory, and so the CPU seconds too).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"
STAGE_ORDER = ("load", "layout", "detection", "orientation", "recognition", "fixed_pitch", "tables", "formulas",
               "reading_order", "rules")


def synthetic_images(folder: Path, pages: int, seed: int) -> Path:
    """`pages` synthetic pages of the shipped model's distribution as PNGs in `folder`."""
    from treedec.data import SynthDataset
    from treedec.models.vlm import SHIPPED

    base = json.loads((SHIPPED / "treedec.json").read_text())["pages"]
    folder.mkdir(parents=True, exist_ok=True)
    for s in SynthDataset(pages=pages, seed=seed, base=base):
        s.image.save(folder / f"{s.name}.png")
    return folder


def draft(data: list[str], out: Path, ocr: str) -> dict:
    """`python -m treedec draft` on `data` in a fresh process; its summary."""
    args = [sys.executable, "-m", "treedec", "draft", *data, f"out={out}"] + ([f"ocr={ocr}"] if ocr else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    pages = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "pages").glob("*.json"))]
    summary["page_cpu_s"] = sorted(p["cpu_s"] for p in pages if "cpu_s" in p)
    return summary


def row(name: str, s: dict) -> dict:
    """One set's figures: CPU-s per page (start-up included), per stage, and outside the stages."""
    n = s["pages_drafted"]
    cpu = s["page_cpu_s"]
    return {"set": name, "pages": n, "cpu_s_per_page": s["cpu_s_per_page"],
            "stages": {k: s["stage_cpu_s_per_page"][k] for k in STAGE_ORDER},
            "outside_stages": round(s["other_cpu_s"] / n, 4) if n else None,
            "page_cpu_s_min_median_max": [cpu[0], cpu[len(cpu) // 2], cpu[-1]] if cpu else None,
            "drafter": s["drafter"]["tag"], "onnxruntime_threads": s["onnxruntime_threads"]}


def markdown(rows: list[dict]) -> str:
    head = ["set", "pages", "CPU-s / page (start-up incl.)", *STAGE_ORDER, "outside stages"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["set"], str(r["pages"]), f"{r['cpu_s_per_page']:.2f}"]
        cells += [f"{r['stages'][k]:.3f}" for k in STAGE_ORDER] + [f"{r['outside_stages']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    t = rows[0]["onnxruntime_threads"] if rows else {}
    lines.append(f"\nCPU seconds per page (`time.process_time` of the `draft` process); drafter {rows[0]['drafter'] if rows else '-'}; "
                 f"ONNX Runtime intra-op threads {t.get('intra_op')}, inter-op {t.get('inter_op')}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", default=str(DEMO), help="an OmniDocBench folder ('' to skip)")
    ap.add_argument("--demo-limit", type=int, default=None, help="only its first N pages")
    ap.add_argument("--synth", type=int, default=32, help="synthetic pages (0 to skip)")
    ap.add_argument("--seed", type=int, default=3_000_000, help="first synthetic seed (held out from training)")
    ap.add_argument("--ocr", default="", help="the drafter's options as a Hydra mapping, e.g. '{det_side: 640}'")
    ap.add_argument("--out", default=str(ROOT / "runs" / "profile_drafter"))
    args = ap.parse_args()
    out = Path(args.out)
    rows = []
    if args.demo:
        data = ["data=omnidocbench", f"data.root={args.demo}"] + ([f"data.limit={args.demo_limit}"] if args.demo_limit else [])
        rows.append(row("omnidocbench_demo", draft(data, out / "demo", args.ocr)))
    if args.synth:
        images = synthetic_images(out / "synth_images", args.synth, args.seed)
        rows.append(row("synthetic", draft(["data=images", f"data.root={images}"], out / "synth", args.ocr)))
    table = markdown(rows)
    print(table)
    (out / "profile_drafter.md").write_text(table + "\n", encoding="utf-8")
    (out / "profile_drafter.json").write_text(json.dumps({"rows": rows, "ocr": args.ocr}, indent=1), encoding="utf-8")
    print(f"\nwrote {out}/profile_drafter.md and .json")


if __name__ == "__main__":
    main()
