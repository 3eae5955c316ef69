"""The text detector, recogniser and layout model on OpenVINO in bfloat16, where the CPU computes bfloat16
natively: measured on demo pages, one thread, the recogniser about
1.5x and the detector 1.4x faster than ONNX Runtime's int8 copies (`int8.py`), from the same fp32
models rapidocr ships (docs/results.md, "Drafter version 6"), on a Xeon with AMX.

`engine(choice)` resolves the drafter's `engine` option ("auto": OpenVINO in bfloat16 when the
package is installed and OpenVINO itself computes in bfloat16 by default on this CPU -- it does
so where AMX makes it pay, not on CPUs with AVX-512 BF16 alone, unmeasured here -- else ONNX
Runtime; `openvino` asks for it wherever the CPU has bfloat16). The drafts depend on the
engine, so the resolved one is part of the drafter's cache key, never "auto".

A process that has run OpenVINO and later forks can crash: the test suite's workers did, in a
training test that forks its batch loaders and in a vLLM test, each after an OpenVINO drafter had
been loaded in the same worker (not reproduced outside pytest). The drafter's own worker pool
starts by spawn, not fork. `TREEDEC_DRAFTER_ENGINE=onnxruntime` makes "auto" mean ONNX Runtime for
every run of a machine; the suite sets it and runs its OpenVINO checks in processes of their own.

`pin_rapidocr` and `pin_layout` make the libraries' OpenVINO sessions compute in bfloat16 on a
fixed thread count whatever OpenVINO's defaults on the machine are. `WidthBuckets` pads the
recogniser's batches to a multiple of `multiple` pixels wide: OpenVINO prepares its kernels for
each input shape it meets, so a page's 20-odd batches of distinct widths cost about half as much
again as the same widths in a few shapes; the padding is what rapidocr pads a batch's narrower
crops with (0 after normalising), and the output is cut back to the width the batch had.
"""
from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from treedec.errors import UserError

ENGINES = ("auto", "onnxruntime", "openvino")
ENGINE_VARIABLE = "TREEDEC_DRAFTER_ENGINE"  # what "auto" means on this machine, when set


@functools.cache
def bf16_cpu(by_default: bool = False) -> bool:
    """Whether OpenVINO is installed and this CPU computes bfloat16 natively (`by_default`: and
    OpenVINO chooses bfloat16 on it unasked, as it does with AMX)."""
    if importlib.util.find_spec("openvino") is None:
        return False
    import openvino as ov

    core = ov.Core()
    if by_default:
        return str(core.get_property("CPU", "INFERENCE_PRECISION_HINT")) == str(ov.Type.bf16)
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def check_engine(choice: str, where: str = "") -> None:
    """A one-line error unless `choice` names an engine (`where`: where it was given, in the message)."""
    if choice not in ENGINES:
        raise UserError(f"bad drafter engine {choice!r}{where}: one of {', '.join(ENGINES)}")


def engine(choice: str) -> str:
    """The engine the drafter's `engine` option `choice` runs its text models on ("auto": the
    environment's TREEDEC_DRAFTER_ENGINE when set, else as the module docstring says)."""
    check_engine(choice)
    if choice == "auto" and os.environ.get(ENGINE_VARIABLE, "auto") != "auto":
        check_engine(os.environ[ENGINE_VARIABLE], f" in {ENGINE_VARIABLE}")
        return engine(os.environ[ENGINE_VARIABLE])
    if choice == "auto":
        return "openvino" if bf16_cpu(by_default=True) else "onnxruntime"
    if choice == "openvino" and not bf16_cpu():
        raise UserError("the drafter's engine=openvino needs the openvino package and a CPU with bfloat16 "
                        "(Intel AMX or AVX-512 BF16): pip install openvino, or engine=onnxruntime")
    return choice


def layout_engine(threads: int) -> dict:
    """rapid-layout's engine arguments that put its model on OpenVINO with `threads` threads."""
    return {"engine_type": "openvino",
            "engine_cfg": {"inference_num_threads": int(threads), "num_streams": 1, "performance_hint": "LATENCY"}}


def openvino_params(threads: int) -> dict:
    """rapidocr's parameters that put its detector and recogniser on OpenVINO with `threads` threads."""
    from rapidocr.utils.typings import EngineType

    return {"Det.engine_type": EngineType.OPENVINO, "Rec.engine_type": EngineType.OPENVINO,
            "EngineConfig.openvino.inference_num_threads": int(threads),
            "EngineConfig.openvino.performance_hint": "LATENCY", "EngineConfig.openvino.num_streams": 1}


def pin_rapidocr(session, threads: int) -> None:
    """Make a rapidocr OpenVINO `session` (its infer request is `session.session`) compute in
    bfloat16 on `threads` threads."""
    compiled = _bf16(session.session.get_compiled_model(), session.model, threads)
    if compiled is not None:
        session.session = compiled.create_infer_request()


def pin_layout(session, threads: int) -> None:
    """Make a rapid-layout OpenVINO `session` compute in bfloat16 on `threads` threads."""
    compiled = _bf16(session.compiled_model, session.model, threads)
    if compiled is not None:
        session.compiled_model, session.infer_request = compiled, compiled.create_infer_request()


def _bf16(compiled, model, threads: int):
    """`model` compiled again in bfloat16 on `threads` threads (at most the machine's cores, which
    OpenVINO caps it at), or None when `compiled` already is so: OpenVINO's defaults on an AMX CPU."""
    import openvino as ov

    threads = max(1, min(int(threads), os.cpu_count() or 1))
    if (str(compiled.get_property("INFERENCE_PRECISION_HINT")) == str(ov.Type.bf16)
            and int(compiled.get_property("INFERENCE_NUM_THREADS")) == threads):
        return None
    config = {"INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": threads,
              "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    return ov.Core().compile_model(model, "CPU", config)


class WidthBuckets:
    """A recogniser session whose batches are padded to a multiple of `multiple` pixels wide;
    its output (batch, width // 8 steps, classes) is cut back to the batch's own steps."""

    def __init__(self, session, multiple: int):
        self.session, self.multiple = session, int(multiple)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        width = batch.shape[-1]
        padded = -(-width // self.multiple) * self.multiple
        if padded != width:
            batch = np.pad(batch, [(0, 0)] * (batch.ndim - 1) + [(0, padded - width)])
        return self.session(batch)[:, :steps(width)]


def steps(width: int) -> int:
    """The recogniser's output steps for an input `width` pixels wide (PP-OCR's rec: 1 per 8 px,
    checked on widths 48-400, every remainder mod 8, in tests/openvino_checks.py)."""
    return (width + 3) // 8
