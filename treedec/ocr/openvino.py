"""The text detector, recogniser and layout model on OpenVINO in bfloat16, where the CPU computes bfloat16
natively: measured on demo pages, one thread, the recogniser about
1.5x and the detector 1.4x faster than ONNX Runtime's int8 copies (`int8.py`), from the same fp32
models rapidocr ships (docs/results.md, "Drafter version 6"), on a Xeon with AMX.

`engine(choice)` resolves the drafter's `engine` option ("auto": OpenVINO in bfloat16 when the
package is installed and OpenVINO itself computes in bfloat16 by default on this CPU -- it does
so where AMX makes it pay, not on CPUs with AVX-512 BF16 alone, unmeasured here -- else ONNX
Runtime; `openvino` asks for it wherever the CPU has bfloat16). The drafts depend on the
engine, so the resolved one is part of the drafter's cache key, never "auto".

`pin(session, threads)` makes a rapidocr OpenVINO session compute in bfloat16 with a fixed
thread count whatever OpenVINO's defaults on the machine are. `WidthBuckets` pads the
recogniser's batches to a multiple of `multiple` pixels wide: OpenVINO prepares its kernels for
each input shape it meets, so a page's 20-odd batches of distinct widths cost about half as much
again as the same widths in a few shapes; the padding is what rapidocr pads a batch's narrower
crops with (0 after normalising), and the output is cut back to the width the batch had.
"""
from __future__ import annotations

import functools
import importlib.util

import numpy as np

from treedec.errors import UserError

ENGINES = ("auto", "onnxruntime", "openvino")


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


def engine(choice: str) -> str:
    """The engine the drafter's `engine` option `choice` runs its text models on."""
    if choice not in ENGINES:
        raise UserError(f"bad drafter engine {choice!r}: one of {', '.join(ENGINES)}")
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


def pin(session, threads: int) -> None:
    """Make a rapidocr or rapid-layout OpenVINO `session` compute in bfloat16 with `threads`
    threads (compiled again unless OpenVINO's defaults on this machine already did so)."""
    import openvino as ov

    layout = hasattr(session, "infer_request")  # rapid-layout's session; rapidocr's holds its request as `session`
    compiled = session.compiled_model if layout else session.session.get_compiled_model()
    if (str(compiled.get_property("INFERENCE_PRECISION_HINT")) == str(ov.Type.bf16)
            and int(compiled.get_property("INFERENCE_NUM_THREADS")) == int(threads)):
        return
    config = {"INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": int(threads),
              "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    compiled = ov.Core().compile_model(session.model, "CPU", config)
    if layout:
        session.compiled_model, session.infer_request = compiled, compiled.create_infer_request()
    else:
        session.session = compiled.create_infer_request()


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
    checked for every width 8-700 in tests/test_drafter_engine.py)."""
    return (width + 3) // 8
