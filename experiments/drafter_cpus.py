"""The pipeline drafter on every CPU kind: for each engine and precision the drafter can use on a
kind, its CPU-s a page (the whole `treedec draft` command, start-up and loading included) and
HSD's accepted tokens per step under forcing from its drafts, against fp32's drafts on ONNX
Runtime. What `treedec/ocr/choice.py`'s `MEASURED` table is made from (docs/results.md, "The
drafter on every CPU").

    python experiments/drafter_cpus.py --kinds native,avx512,avx2 --out runs/drafter-cpus

Kinds other than `native` run the drafter under `scripts/cpuid_mask/run KIND` (this CPU told it
lacks AVX-512/VNNI/AMX/bf16: the libraries take the kernels such a CPU runs; the cores' own speed
stays this CPU's, so CPU-s figures of a masked kind are this CPU running that kind's code, and the
output says so). The forced HSD runs need no mask: forcing decodes the truth, so the accepted tokens
depend on the drafts alone. Each `draft` runs once after a warm-up that makes the int8 copies;
run it on a quiet machine. Figures are given over every page and over the two halves of the
sorted pages: the choice is made on pages 0-5 (the int8 calibration pages), 6-11 are held out.

Output: OUT/table.md and OUT/figures.json (per kind and pair: CPU-s a page, stage split,
accepted per step, its ratio to fp32's, text edit, and the CPU as `treedec.cpu` saw it).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"
MASK = ROOT / "scripts" / "cpuid_mask" / "run"
PAIRS = [("onnxruntime", "fp32"), ("onnxruntime", "int8"), ("onnxruntime", "int8_reduced"), ("openvino", "fp32"),
         ("openvino", "int8"), ("openvino", "bf16")]
FORCED = ["model=forced", "model.size=1m", "data=omnidocbench", "strategy=hsd", "runtime.max_pages=16",
          "runtime.max_new_tokens=12000", "runtime.max_branches=4096", "runtime.threads=1", "cold_drafts=false"]


def under(kind: str, argv: list[str]) -> list[str]:
    return argv if kind == "native" else [str(MASK), kind, *argv]


def cpu_of(kind: str) -> dict:
    code = "import json; from treedec.cpu import cpu_info; print(json.dumps(cpu_info()))"
    return json.loads(subprocess.run(under(kind, [sys.executable, "-c", code]), capture_output=True, text=True,
                                     check=True).stdout)


def bf16_on(kind: str) -> bool:
    code = "from treedec.ocr.openvino import bf16_cpu; print(bf16_cpu())"
    return subprocess.run(under(kind, [sys.executable, "-c", code]), capture_output=True, text=True,
                          check=True).stdout.strip() == "True"


def timed(argv: list[str], log: Path) -> float:
    """The command's user + system CPU seconds (its children's too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as f:
        done = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"drafter_cpus.py: failed ({done.returncode}), see {log}: {' '.join(argv)}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def data_args(root: Path, limit: int | None = None) -> list[str]:
    return ["data=omnidocbench", f"data.root={root}"] + ([f"data.limit={limit}"] if limit else [])


def halves(folder: Path, key: str) -> tuple[float, float]:
    """The mean of the page figure `key` over the sorted pages' first and second halves."""
    pages = sorted(p for p in (folder / "pages").glob("*.json") if not p.name.endswith(".omnidocbench.json"))
    values = [json.loads(p.read_text()).get(key) for p in pages]
    values = [v for v in values if v is not None]
    h = len(values) // 2
    return (round(sum(values[:h]) / max(h, 1), 4), round(sum(values[h:]) / max(len(values) - h, 1), 4))


def draft(kind: str, engine: str, precision: str, args, out: Path) -> dict:
    """The pair's drafts of every page, timed (after a warm-up page that makes the int8 copies)."""
    ocr = f"ocr={{engine: {engine}, precision: {precision}}}"
    name = f"{kind}-{engine}-{precision}"
    warm = out / f"warm-{name}"
    timed(under(kind, [sys.executable, "-m", "treedec", "draft", *data_args(args.root, 1), ocr,
                       f"out={warm}"]), out / f"{name}.warm.log")
    shutil.rmtree(warm, ignore_errors=True)
    drafts = out / f"drafts-{name}"
    shutil.rmtree(drafts, ignore_errors=True)
    cpu = timed(under(kind, [sys.executable, "-m", "treedec", "draft", *data_args(args.root), ocr,
                             f"out={drafts}"]), out / f"{name}.draft.log")
    summary = json.loads((drafts / "summary.json").read_text())
    pages = summary["pages"]
    return {"kind": kind, "engine": engine, "precision": precision, "pages": pages, "drafts": str(drafts),
            "cpu_s_per_page": round(cpu / pages, 3), "drafter_cpu_s_per_page": summary.get("cpu_s_per_page"),
            "stage_cpu_s_per_page": summary.get("stage_cpu_s_per_page"), "drafter": summary.get("drafter"),
            "draft_cpu_s_halves": halves(drafts, "cpu_s")}


def forced(row: dict, args, out: Path) -> subprocess.Popen:
    """HSD under forcing from the row's drafts (no mask: the accepted tokens depend on the drafts alone)."""
    folder = out / f"forced-{row['kind']}-{row['engine']}-{row['precision']}"
    shutil.rmtree(folder, ignore_errors=True)
    row["forced"] = str(folder)
    log = open(out / f"{folder.name}.log", "w")
    return subprocess.Popen([sys.executable, "-m", "treedec", "run", *FORCED, *data_args(args.root)[1:],
                             f"strategy.drafts={row['drafts']}", f"out={folder}"], stdout=log, stderr=subprocess.STDOUT,
                            cwd=ROOT)


def acceptance(row: dict) -> None:
    folder = Path(row["forced"])
    run = json.loads((folder / "summary.json").read_text())
    row.update(accepted_per_step=run.get("accepted_per_step"), median_steps=run.get("median_steps"),
               text_edit_vs_truth=run.get("text_edit_vs_truth"), pages_flagged=run.get("pages_flagged"),
               accepted_per_step_halves=halves(folder, "accepted_per_step"))


def table(rows: list[dict], cpus: dict) -> str:
    lines = ["| CPU kind | engine | precision | CPU-s a page | detection | recognition | accepted/step | x fp32's | kept |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = next(x for x in rows if x["kind"] == r["kind"] and (x["engine"], x["precision"]) == ("onnxruntime", "fp32"))
        ratio = r["accepted_per_step"] / ref["accepted_per_step"]
        st = r["stage_cpu_s_per_page"] or {}
        lines.append(f"| {r['kind']} | {r['engine']} | {r['precision']} | {r['cpu_s_per_page']:.2f} | "
                     f"{st.get('detection', 0):.2f} | {st.get('recognition', 0):.2f} | {r['accepted_per_step']:.3f} | "
                     f"{ratio:.3f} | {'yes' if ratio >= 0.98 else 'no'} |")
    lines.append("")
    for kind, info in cpus.items():
        masked = f", masked from {info['masked_from']} by scripts/cpuid_mask" if info.get("masked_from") else ""
        lines.append(f"- {kind}: {info['model']}, flags {' '.join(info['flags'])}, {info['cores']} cores{masked}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="native,avx2", help="native, avx512, avx2 (comma-separated)")
    ap.add_argument("--pairs", default=None, help="engine:precision,... (default: every pair a kind runs)")
    ap.add_argument("--root", type=Path, default=DEMO)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / f"drafter-cpus-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    if not args.root.is_dir():
        raise SystemExit(f"drafter_cpus.py: no data set at {args.root}")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [tuple(p.split(":")) for p in args.pairs.split(",")] if args.pairs else PAIRS
    rows, cpus = [], {}
    path = args.out / "figures.json"
    for kind in args.kinds.split(","):
        cpus[kind] = cpu_of(kind)
        bf16 = bf16_on(kind)
        pairs = [p for p in wanted if p[1] != "bf16" or bf16]
        if ("onnxruntime", "fp32") not in pairs:
            pairs.insert(0, ("onnxruntime", "fp32"))  # the reference
        for engine, precision in pairs:
            print(f"{kind}: {engine} {precision} ...", flush=True)
            rows.append(draft(kind, engine, precision, args, args.out))
            print(f"  {rows[-1]['cpu_s_per_page']} CPU-s a page", flush=True)
            path.write_text(json.dumps({"cpus": cpus, "rows": rows}, indent=1))
    for i in range(0, len(rows), 2):  # the forced runs, two at a time (untimed)
        for proc in [forced(r, args, args.out) for r in rows[i:i + 2]]:
            if proc.wait() != 0:
                raise SystemExit(f"drafter_cpus.py: a forced run failed, see {args.out}/forced-*.log")
        for r in rows[i:i + 2]:
            acceptance(r)
            print(f"{r['kind']} {r['engine']} {r['precision']}: {r['accepted_per_step']} accepted a step", flush=True)
        path.write_text(json.dumps({"cpus": cpus, "rows": rows}, indent=1))
    (args.out / "table.md").write_text(table(rows, cpus))
    print((args.out / "table.md").read_text())


if __name__ == "__main__":
    main()
