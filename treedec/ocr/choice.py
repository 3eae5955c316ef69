"""What the drafter's text models (detector, recogniser; the layout model follows the engine) run
on: an engine and a precision, chosen by what this CPU does well, as measured.

    choose("auto", "auto")  -> Choice(engine="openvino", precision="bf16", why="auto on an amx CPU: ...")

Engines and precisions:

- `onnxruntime`: `fp32` (the shipped models), `int8` (quantised copies, `int8.py`), `int8_reduced`
  (the same with 7-bit weights: no saturation in the u8s8 kernels of CPUs without VNNI), `int8_u8`
  (uint8 weights: ONNX Runtime's u8u8 kernels, which widen before multiplying: no saturation either),
  `int8_mixed` (int8 but for the few nodes whose saturation there hurts the drafts most, left in fp32:
  the lists shipped beside the activation ranges, `int8.shipped_exclusion`);
- `openvino`: `fp32`, `bf16` (CPUs with bfloat16: AMX or AVX512-BF16), `int8` / `int8_reduced`
  (the same quantised copies, on OpenVINO's kernels).

`auto` takes, on this CPU's kind (`treedec.cpu`), the cheapest pair whose drafts keep HSD's
accepted tokens per step within 2 % of fp32's drafts, measured on the demo pages with
`experiments/drafter_cpus.py` (docs/results.md, "The drafter on every CPU"): `MEASURED` lists
each kind's pairs that held, cheapest first. A pair asked for is used as asked, its `why` saying
so. The drafts depend on the pair, so the resolved one is part of the drafter's cache key.
`TREEDEC_DRAFTER_ENGINE` sets what an `auto` engine means on a machine (the test suite sets
`onnxruntime`: treedec/ocr/openvino.py says why).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from treedec.errors import UserError

ENGINES = ("auto", "onnxruntime", "openvino")
PRECISIONS = ("auto", "fp32", "int8", "int8_reduced", "int8_u8", "int8_mixed", "bf16")
INT8 = ("int8", "int8_reduced", "int8_u8", "int8_mixed")
ENGINE_VARIABLE = "TREEDEC_DRAFTER_ENGINE"  # what "auto" means on this machine, when set
DOCS = "docs/results.md, 'The drafter on every CPU'"

# per CPU kind: the pairs whose drafts held (>= 0.98x fp32's accepted tokens per step under forcing on the
# 12 demo pages), cheapest CPU-s a page first (docs/results.md, "The drafter on every CPU"):
# - amx (a Xeon with AMX): openvino bf16 2.00 (0.995x), onnxruntime int8 2.98 (0.986x), openvino fp32 3.96,
#   onnxruntime fp32 4.44; not kept: onnxruntime int8_reduced (0.974x), openvino int8 (0.975x);
# - avx2 (told it has AVX2 alone, scripts/cpuid_mask): on an AMD EPYC's cores onnxruntime fp32 5.21 (4.96),
#   openvino fp32 5.46; on the Xeon's openvino fp32 5.71, onnxruntime fp32 6.37 (the EPYC's order is kept: the
#   kind of CPU with AVX2 alone); not kept: onnxruntime int8 (0.929x: u8s8 saturates without VNNI), int8_reduced
#   (0.974x), int8_u8 (0.978x), int8_mixed (0.979x), openvino int8 (0.904x);
# - vnni (an AMD EPYC of the Zen 4 generation: AVX512-VNNI and AVX512-BF16, no AMX): onnxruntime int8 3.02 (0.986x),
#   openvino bf16 3.25 (0.993x; where the CPU has bfloat16), onnxruntime fp32 4.86, openvino fp32 5.08; not kept:
#   onnxruntime int8_reduced (0.974x), openvino int8 (0.975x);
# - other: fp32.
MEASURED: dict[str, list[tuple[str, str]]] = {
    "amx": [("openvino", "bf16"), ("onnxruntime", "int8"), ("openvino", "fp32"), ("onnxruntime", "fp32")],
    "vnni": [("onnxruntime", "int8"), ("openvino", "bf16"), ("onnxruntime", "fp32"), ("openvino", "fp32")],
    "avx2": [("onnxruntime", "fp32"), ("openvino", "fp32")],
    "other": [("onnxruntime", "fp32"), ("openvino", "fp32")],
}


@dataclass(frozen=True)
class Choice:
    engine: str
    precision: str
    why: str


def check_engine(choice: str, where: str = "") -> None:
    """A one-line error unless `choice` names an engine (`where`: where it was given, in the message)."""
    if choice not in ENGINES:
        raise UserError(f"bad drafter engine {choice!r}{where}: one of {', '.join(ENGINES)}")


def check_precision(choice: str) -> None:
    if choice not in PRECISIONS:
        raise UserError(f"bad drafter precision {choice!r}: one of {', '.join(PRECISIONS)}")


def _engine_asked(engine: str) -> str:
    """`engine`, with "auto" read from TREEDEC_DRAFTER_ENGINE where that is set."""
    check_engine(engine)
    if engine == "auto" and os.environ.get(ENGINE_VARIABLE, "auto") != "auto":
        check_engine(os.environ[ENGINE_VARIABLE], f" in {ENGINE_VARIABLE}")
        return os.environ[ENGINE_VARIABLE]
    return engine


def _runs_here(engine: str, precision: str) -> bool:
    """Whether this machine can run the pair (OpenVINO installed; bfloat16 on a CPU with it)."""
    from treedec.ocr.openvino import bf16_cpu, installed

    if engine == "openvino" and not installed():
        return False
    if precision == "bf16":
        return engine == "openvino" and bf16_cpu()
    return True


def choose(engine: str = "auto", precision: str = "auto", int8: bool = True, kind: str | None = None) -> Choice:
    """The engine and precision the drafter's options `engine` and `precision` mean on this CPU
    (`kind`: the CPU's class, default this one's); `int8`: whether any model may be quantised
    (the int8_det / int8_rec options), else an int8 precision is never chosen."""
    from treedec.cpu import cpu_info

    engine = _engine_asked(engine)
    check_precision(precision)
    if engine != "auto" and precision != "auto":
        if not _runs_here(engine, precision):
            raise UserError(f"the drafter's engine={engine} precision={precision} cannot run here: "
                            + ("bfloat16 runs on OpenVINO, on a CPU with AMX or AVX512-BF16"
                               if precision == "bf16" else "pip install openvino (the hsd extra)"))
        return Choice(engine, precision, "asked for")
    kind = kind or cpu_info()["kind"]
    for pair in MEASURED.get(kind, MEASURED["other"]):
        if engine in ("auto", pair[0]) and precision in ("auto", pair[1]) and (int8 or pair[1] not in INT8) \
                and _runs_here(*pair):
            return Choice(*pair, f"auto on an {kind} CPU: the cheapest {_what(engine, precision)} whose drafts keep "
                                 f"fp32's accepted tokens ({DOCS})")
    if engine == "auto":  # a precision nothing measured holds on this kind: the cheapest engine running it
        pair = next(((e, precision) for e in ("onnxruntime", "openvino") if _runs_here(e, precision)), None)
        if pair is None:
            raise UserError(f"the drafter's precision={precision} cannot run on this CPU ({kind}); "
                            f"precision=auto chooses one that does")
        return Choice(*pair, f"precision={precision} asked for; not measured to keep drafts on an {kind} CPU ({DOCS})")
    return Choice(engine, "fp32", f"engine={engine} asked for; fp32, the reference precision")


def _what(engine: str, precision: str) -> str:
    if engine == "auto" and precision == "auto":
        return "engine and precision"
    return f"precision on {engine}" if engine != "auto" else f"engine for {precision}"
