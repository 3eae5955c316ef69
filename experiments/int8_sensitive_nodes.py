"""Rank the quantisable nodes (Conv / ConvTranspose / MatMul / Gemm) of the drafter's text
recogniser and detector by how much of their int8 copy's error, on a CPU with AVX2 but without
VNNI (where ONNX Runtime's u8s8 kernels saturate: treedec/ocr/int8.py), goes when that node alone
is left in fp32 in the otherwise quantised model; then the error of the copies leaving the top 1,
2, ... nodes in fp32, and (`--greedy N`) a forward selection of N nodes, each round the one that
removes the most of the error the nodes chosen before leave. What the `int8_mixed` precision's
shipped exclusion lists are chosen from.

    python experiments/int8_sensitive_nodes.py --greedy 6 --out runs/int8-sensitive   # ranks both models
    python experiments/int8_sensitive_nodes.py --models det --write 6 --out runs/int8-sensitive   # ship 6

The script runs itself under `scripts/cpuid_mask/run avx2` (the kernels such a CPU runs). Inputs
are those the fp32 drafter gives each model while it drafts the first six OmniDocBench demo pages
by sorted name (the tuning pages, as experiments/int8_calibration.py: every third recogniser
batch, every detector input); the reference is the fp32 model's outputs on them. Errors: for the
recogniser, the time steps whose CTC argmax differs from fp32's (`steps`, what ranks), the lines
whose greedy CTC decoding differs (`lines`), the max / mean abs error of the output
probabilities; for the detector, the pixels on the other side of rapidocr's 0.3 threshold
(`pixels`, what ranks) and the max / mean abs error of the probability map. `macs` is the node's
share of the model's multiply-adds over those inputs: what leaving it in fp32 costs. ONNX Runtime
runs on one thread: deterministic; nothing is timed.

Output: OUT/<model stem>.ranking.json (the fully quantised copy's error, each node's error when
it alone stays fp32, best first, the error of the copies leaving the top k in fp32, and the forward
selection's rounds); with `--write N`: treedec/ocr/int8_ranges/<model stem>.exclude.json, the first
N nodes of the forward selection where it went that far, else the top N (a ranking in OUT is read
and extended, not made again).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MASK = ROOT / "scripts" / "cpuid_mask" / "run"
OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
RANKED_BY = {"rec": "steps", "det": "pixels"}
DET_THRESH = 0.3  # rapidocr's detector threshold (Det.thresh)


def under_mask() -> None:
    """Run this script again under the AVX2 mask, unless it already is."""
    if os.environ.get("CPUID_MASK") != "avx2":
        os.execv(str(MASK), [str(MASK), "avx2", sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]])


def record(pages: int, every: int) -> dict[str, list[dict]]:
    """The inputs the fp32 drafter gives its detector (all) and recogniser (every `every`th batch)
    while it drafts the first `pages` demo pages by sorted name."""
    from int8_calibration import DEMO, Recorder
    from PIL import Image

    from treedec.ocr.pipeline import PipelineOCR

    ocr = PipelineOCR(engine="onnxruntime", precision="fp32")
    ocr._load()
    det, rec = ocr._ocr.text_det, ocr._ocr.text_rec
    det.session, rec.session = Recorder(det.session), Recorder(rec.session, every=every)
    for f in sorted(DEMO.iterdir())[:pages]:
        ocr.draft(Image.open(f).convert("RGB"), f.name)
    return {"det": det.session.inputs, "rec": rec.session.inputs}


def session(path: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = 1, 1, 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # as rapidocr's sessions
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def outputs(path: Path, inputs: list[dict]) -> list[np.ndarray]:
    run = session(path)
    return [run.run(None, x)[0] for x in inputs]


def ctc_lines(probs: np.ndarray) -> list[tuple[int, ...]]:
    """Each row's greedy CTC decoding (repeats merged, blank 0 dropped), as label indices."""
    lines = []
    for best in probs.argmax(-1):
        keep = np.ones(len(best), bool)
        keep[1:] = best[1:] != best[:-1]
        lines.append(tuple(int(c) for c in best[keep & (best != 0)]))
    return lines


def errors(task: str, ref: list[np.ndarray], out: list[np.ndarray]) -> dict:
    """The copy's outputs `out` against fp32's `ref` (the module docstring says what each figure is)."""
    diff = np.concatenate([np.abs(r - o).ravel() for r, o in zip(ref, out)])
    figures = {"max_abs": round(float(diff.max()), 5), "mean_abs": round(float(diff.mean()), 7)}
    if task == "rec":
        figures["steps"] = int(sum((r.argmax(-1) != o.argmax(-1)).sum() for r, o in zip(ref, out)))
        figures["lines"] = int(sum(a != b for r, o in zip(ref, out) for a, b in zip(ctc_lines(r), ctc_lines(o))))
    else:
        figures["pixels"] = int(sum(((r > DET_THRESH) != (o > DET_THRESH)).sum() for r, o in zip(ref, out)))
    return figures


def score(task: str, figures: dict) -> tuple:
    return figures[RANKED_BY[task]], figures["mean_abs"]


def quantisable(pre: Path) -> list[tuple[str, str]]:
    """The (name, op) of the prepared model's nodes whose int8 kernels multiply, in graph order."""
    import onnx

    return [(n.name, n.op_type) for n in onnx.load(str(pre)).graph.node if n.op_type in OPS]


def macs(pre: Path, inputs: list[dict]) -> dict[str, float]:
    """Each quantisable node's share of the multiply-adds of all of them, over `inputs` (shapes read
    from a run of the prepared fp32 model with their tensors as extra outputs)."""
    import onnx

    model = onnx.load(str(pre))
    weights = {i.name: tuple(i.dims) for i in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type in OPS]
    known = {v.name for v in (*model.graph.input, *model.graph.output)} | set(weights)
    wanted = sorted({t for n in nodes for t in (n.input[0], n.output[0])} - known)
    model.graph.output.extend(onnx.ValueInfoProto(name=t) for t in wanted)
    with tempfile.TemporaryDirectory(prefix="int8-sensitive-") as tmp:
        onnx.save(model, f"{tmp}/shapes.onnx")
        run = session(Path(f"{tmp}/shapes.onnx"))
        names = [o.name for o in run.get_outputs()]
        total = dict.fromkeys((n.name for n in nodes), 0.0)
        for x in inputs:
            shapes = {**{k: v.shape for k, v in x.items()}, **dict(zip(names, (a.shape for a in run.run(None, x))))}
            for n in nodes:
                total[n.name] += _node_macs(n, shapes, weights)
    whole = sum(total.values())
    return {k: float(v / whole) for k, v in total.items()}


def _node_macs(node, shapes: dict, weights: dict) -> float:
    """The multiply-adds of one run of `node` (shapes: tensor name -> shape)."""
    out, first = np.prod(shapes[node.output[0]], dtype=float), shapes.get(node.input[0]) or weights[node.input[0]]
    if node.op_type == "Conv":
        return out * np.prod(weights[node.input[1]][1:], dtype=float)
    if node.op_type == "ConvTranspose":
        return np.prod(first, dtype=float) * np.prod(weights[node.input[1]][1:], dtype=float)
    return out * first[-1]  # MatMul / Gemm: each output sums over the first input's last axis


class Copies:
    """int8 copies of one model (`task`), each scored against the fp32 model's outputs on `inputs`
    (made in `folder`)."""

    def __init__(self, task: str, inputs: list[dict], folder: Path):
        from treedec.ocr import int8
        from treedec.ocr.pipeline import rapidocr_model

        self.task, self.inputs, self.model = task, inputs, rapidocr_model(task)
        self.pre, self.copy = int8.prepare(self.model, folder / "pre.onnx"), folder / "q.onnx"
        self.ref = outputs(self.pre, inputs)

    def error(self, exclude: tuple[str, ...]) -> dict:
        """The errors of the copy leaving the nodes `exclude` in fp32."""
        from treedec.ocr import int8

        int8.quantize_prepared(self.pre, int8.ranges_path(self.model), self.copy, exclude=exclude)
        return errors(self.task, self.ref, outputs(self.copy, self.inputs))


def rank(copies: Copies, top: int) -> dict:
    """The ranking of the model's nodes, each alone in fp32 (the module docstring says what it holds)."""
    task, share, nodes = copies.task, macs(copies.pre, copies.inputs), quantisable(copies.pre)
    full = copies.error(())
    print(f"{task}: {len(copies.inputs)} inputs, {len(nodes)} quantisable nodes; fully quantised: {full}", flush=True)
    alone = []
    for i, (name, op) in enumerate(nodes):
        alone.append({"node": name, "op": op, "macs": round(share[name], 5), **copies.error((name,))})
        print(f"  [{i + 1}/{len(nodes)}] {name} ({op}) fp32: {alone[-1]}", flush=True)
    alone.sort(key=lambda r: score(task, r))
    kept = [{"count": k, "exclude": [r["node"] for r in alone[:k]], "macs": round(sum(r["macs"] for r in alone[:k]), 5),
             **copies.error(tuple(r["node"] for r in alone[:k]))} for k in range(1, min(top, len(alone)) + 1)]
    return {"model": copies.model.name, "inputs": len(copies.inputs), "ranked_by": RANKED_BY[task],
            "quantisable": len(nodes), "fully_quantised": full, "alone_in_fp32": alone, "top_k_in_fp32": kept,
            "greedy": kept[:1]}


def greedy(copies: Copies, ranking: dict, rounds: int, candidates: int) -> None:
    """Forward selection, into `ranking["greedy"]` up to `rounds` nodes: each round leaves in fp32, on
    top of the nodes chosen so far, the one whose exclusion then removes the most error (round 1:
    the ranking's best node alone; round 2 tries every node, later ones the `candidates` best of the
    round before)."""
    task, share = copies.task, {r["node"]: r["macs"] for r in ranking["alone_in_fp32"]}
    chosen = ranking.setdefault("greedy", ranking["top_k_in_fp32"][:1])
    while len(chosen) < rounds:
        before = chosen[-1]["exclude"]
        tried = [n for n in chosen[-1].get("next", share) if n not in before]
        trials = []
        for name in tried:
            trials.append({"node": name, **copies.error(tuple(before) + (name,))})
            print(f"  round {len(chosen) + 1}: {[*before, name]} fp32: {trials[-1]}", flush=True)
        trials.sort(key=lambda r: score(task, r))
        best = dict(trials[0])
        exclude = [*before, best.pop("node")]
        chosen.append({"count": len(exclude), "exclude": exclude, "macs": round(sum(share[n] for n in exclude), 5),
                       **best, "next": [r["node"] for r in trials[1:candidates + 1]]})


def report(task: str, ranking: dict, rows: int = 15) -> None:
    key = RANKED_BY[task]
    full = ranking["fully_quantised"]
    print(f"\n{ranking['model']}: {ranking['quantisable']} quantisable nodes, {ranking['inputs']} inputs; "
          f"fully quantised: {key} {full[key]}, mean_abs {full['mean_abs']}, max_abs {full['max_abs']}"
          + (f", lines {full['lines']}" if task == "rec" else ""))
    print(f"{'rank':>4} {'node (alone in fp32)':<22} {'macs':>7} {key:>7} {'mean_abs':>10} {'max_abs':>8}"
          f" | {'top k in fp32: macs':>19} {key:>7} {'mean_abs':>10}" + (f" {'lines':>5}" if task == "rec" else ""))
    kept = ranking["top_k_in_fp32"]
    for i, r in enumerate(ranking["alone_in_fp32"][:rows]):
        node = f"{r['node']} ({r['op']})"
        line = f"{i + 1:>4} {node:<22} {r['macs']:>7.2%} {r[key]:>7} {r['mean_abs']:>10.7f} {r['max_abs']:>8.5f}"
        if i < len(kept):
            k = kept[i]
            line += f" | {k['macs']:>19.2%} {k[key]:>7} {k['mean_abs']:>10.7f}"
            line += f" {k['lines']:>5}" if task == "rec" else ""
        print(line)
    for g in ranking.get("greedy", [])[1:]:
        print(f"greedy {g['count']}: {', '.join(g['exclude'])}: macs {g['macs']:.2%}, {key} {g[key]}, "
              f"mean_abs {g['mean_abs']}" + (f", lines {g['lines']}" if task == "rec" else ""))


def write_exclusion(ranking: dict, count: int) -> Path:
    """The first `count` nodes of `ranking` (its forward selection where that went so far, else its
    top `count` each alone) as the shipped exclusion list of its model."""
    from treedec.ocr.int8 import exclusion_path

    path = exclusion_path(Path(ranking["model"]))
    by_greedy = len(ranking.get("greedy", [])) >= count
    chosen = (ranking["greedy"] if by_greedy else ranking["top_k_in_fp32"])[count - 1] if count \
        else {"exclude": [], "macs": 0.0}
    how = "chosen one by one, each the one removing the most of the error the earlier ones leave" if by_greedy \
        else "the top of those removing the most error each alone"
    path.write_text(json.dumps({
        "exclude": chosen["exclude"], "macs_in_fp32": chosen["macs"], "quantisable": ranking["quantisable"],
        "chosen_by": f"experiments/int8_sensitive_nodes.py --write {count}: {count} of {ranking['quantisable']} "
                     f"nodes, {how} ({ranking['ranked_by']} against fp32's outputs under the AVX2 mask, on the six "
                     f"tuning demo pages)"}, indent=1) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="rec,det", help="rec, det (comma-separated)")
    ap.add_argument("--pages", type=int, default=6, help="the first N demo pages by sorted name")
    ap.add_argument("--every", type=int, default=3, help="every Nth recogniser batch is an input")
    ap.add_argument("--top", type=int, default=12, help="copies leaving the top 1..TOP nodes in fp32 are measured")
    ap.add_argument("--greedy", type=int, default=1, help="forward selection up to N nodes (extends a ranking in OUT)")
    ap.add_argument("--candidates", type=int, default=24, help="forward selection's rounds after the second try the "
                                                                "N best nodes of the round before")
    ap.add_argument("--write", type=int, default=None, help="ship the first N nodes of each model as its exclusion")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "int8-sensitive")
    args = ap.parse_args()
    under_mask()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = args.models.split(",")
    paths = {t: args.out / f"PP-OCRv6_{t}_small.ranking.json" for t in tasks}
    rankings = {t: json.loads(paths[t].read_text()) for t in tasks if paths[t].is_file()}
    todo = [t for t in tasks if t not in rankings or len(rankings[t].get("greedy", [None])) < args.greedy]
    inputs = record(args.pages, args.every) if todo else {}
    for task in tasks:
        if task in todo:
            with tempfile.TemporaryDirectory(prefix="int8-sensitive-") as tmp:
                copies = Copies(task, inputs[task], Path(tmp))
                rankings[task] = rankings.get(task) or rank(copies, args.top)
                paths[task].write_text(json.dumps(rankings[task], indent=1))
                greedy(copies, rankings[task], args.greedy, args.candidates)
                paths[task].write_text(json.dumps(rankings[task], indent=1))
        report(task, rankings[task])
        if args.write is not None:
            print(f"wrote {write_exclusion(rankings[task], args.write)}")

if __name__ == "__main__":
    main()
