"""The text detector, recogniser and layout model on OpenVINO: in bfloat16 where the CPU computes
it natively (measured on demo pages, one thread, on a Xeon with AMX: the recogniser about 1.5x and
the detector 1.4x faster than ONNX Runtime's int8 copies, `int8.py`), in fp32, or the int8 copies
on OpenVINO's kernels; which one the drafter's `auto` takes on a CPU is `choice.py`'s.

A process that has run OpenVINO and later forks can crash: the test suite's workers did, in a
training test that forks its batch loaders and in a vLLM test, each after an OpenVINO drafter had
been loaded in the same worker (not reproduced outside pytest). The drafter's own worker pool
starts by spawn, not fork. `TREEDEC_DRAFTER_ENGINE=onnxruntime` makes "auto" mean ONNX Runtime for
every run of a machine; the suite sets it and runs its OpenVINO checks in processes of their own.

`pin_rapidocr` and `pin_layout` make the libraries' OpenVINO sessions compute in the chosen
precision on a fixed thread count whatever OpenVINO's defaults on the machine are. `WidthBuckets`
pads the recogniser's batches to a multiple of `multiple` pixels wide: OpenVINO prepares its
kernels for each input shape it meets, so a page's 20-odd batches of distinct widths cost about
half as much again as the same widths in a few shapes; the padding is what rapidocr pads a batch's
narrower crops with (0 after normalising), and the output is cut back to the width the batch had.
"""
from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np


def installed() -> bool:
    return importlib.util.find_spec("openvino") is not None


@functools.cache
def bf16_cpu() -> bool:
    """Whether OpenVINO is installed and this CPU computes bfloat16 natively."""
    if not installed():
        return False
    import openvino as ov

    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


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


def pin_rapidocr(session, threads: int, precision: str) -> None:
    """Make a rapidocr OpenVINO `session` (its infer request is `session.session`) compute in
    `precision` (bf16; else f32, an int8 model's quantised layers in int8) on `threads` threads."""
    compiled = _pinned(session.session.get_compiled_model(), session.model, threads, precision)
    if compiled is not None:
        session.session = compiled.create_infer_request()


def pin_layout(session, threads: int, precision: str) -> None:
    """Make a rapid-layout OpenVINO `session` compute in `precision` on `threads` threads."""
    compiled = _pinned(session.compiled_model, session.model, threads, precision)
    if compiled is not None:
        session.compiled_model, session.infer_request = compiled, compiled.create_infer_request()


def _pinned(compiled, model, threads: int, precision: str):
    """`model` compiled again in `precision` ("bf16"; any other: f32) on `threads` threads (at most
    the machine's cores, which OpenVINO caps it at), or None when `compiled` already is so (as
    OpenVINO's defaults are on an AMX CPU for bf16)."""
    import openvino as ov

    hint = "bf16" if precision == "bf16" else "f32"
    threads = max(1, min(int(threads), os.cpu_count() or 1))
    if (str(compiled.get_property("INFERENCE_PRECISION_HINT")) == str(getattr(ov.Type, hint))
            and int(compiled.get_property("INFERENCE_NUM_THREADS")) == threads):
        return None
    config = {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": threads,
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
