"""int8 copies of the drafter's ONNX models, made at first use into a cache folder.

ONNX Runtime's static quantisation (`quantize_static`, QDQ format, int8 weights per output
channel, uint8 activations) needs each activation's range. `reduce_range` makes the weights 7-bit:
on a CPU without VNNI (AVX2 alone) ONNX Runtime's u8s8 kernels add pairs of uint8 x int8 products
in 16 bits (`vpmaddubsw`), which saturate with 8-bit weights -- the int8 recogniser then loses
drafts there (docs/results.md, "The drafter on every CPU") -- and cannot with 7-bit ones. Those ranges were measured once,
on text lines and pages of the first six OmniDocBench demo pages (by sorted name), with
`experiments/int8_calibration.py`, and ship as small JSON tables in `int8_ranges/`: the
quantised model is then a pure function of the shipped fp32 model, that table and the
onnx / onnxruntime versions, all of which name its cache file. Nothing is downloaded.

    path = int8_model(Path(".../PP-OCRv6_rec_small.onnx"))   # made once, then reused
    path = int8_model(Path(".../PP-OCRv6_rec_small.onnx"), reduce_range=True)   # 7-bit weights
    path = int8_model(Path(".../PP-OCRv6_rec_small.onnx"), unsigned=True)   # uint8 weights (u8u8 kernels)
    path = int8_model(model, exclude=shipped_exclusion(model))   # int8 but for a few nodes left in fp32

`exclude` leaves the named Conv / MatMul nodes in fp32 (weights too; their inputs still pass the
activations' quantisation): those whose u8s8 saturation on a CPU without VNNI hurts the drafts
most, found by `experiments/int8_sensitive_nodes.py` on the six tuning pages and shipped as
`int8_ranges/<model stem>.exclude.json` (the `int8_mixed` precision); the names, those of the
model as `prepare` leaves it, are part of the cache file's digest.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from treedec.errors import UserError

MODEL_CACHE_ENV = "TREEDEC_MODEL_CACHE"
RANGES = Path(__file__).parent / "int8_ranges"
OPSET = 13  # per-channel QDQ needs opset 13; rapidocr's models are opset 11


def default_model_cache() -> Path:
    """`$TREEDEC_MODEL_CACHE`, else `~/.cache/treedec/models`."""
    env = os.environ.get(MODEL_CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "treedec" / "models"


def ranges_path(model: Path) -> Path:
    """The shipped activation ranges of `model` (by its file name)."""
    return RANGES / f"{model.stem}.json"


def exclusion_path(model: Path) -> Path:
    """The shipped list of `model`'s nodes the `int8_mixed` precision leaves in fp32 (by its file name)."""
    return RANGES / f"{model.stem}.exclude.json"


def shipped_exclusion(model: Path) -> tuple[str, ...]:
    """The node names `exclusion_path(model)` lists (its `exclude`); none where no list ships."""
    path = exclusion_path(Path(model))
    return tuple(json.loads(path.read_text())["exclude"]) if path.is_file() else ()


def _digest(model: Path, ranges: Path, exclude: tuple[str, ...] = ()) -> str:
    import onnx
    import onnxruntime

    h = hashlib.sha256(model.read_bytes())
    h.update(ranges.read_bytes())
    h.update(f"onnx {onnx.__version__} onnxruntime {onnxruntime.__version__}".encode())
    if exclude:  # none: the plain copies' digest, as before
        h.update(json.dumps(sorted(exclude)).encode())
    return h.hexdigest()[:12]


def _require_onnx() -> None:
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        raise UserError("the drafter's int8 models are made with the `onnx` package: pip install 'treedec[hsd]' "
                        "(or set the drafter's int8_det / int8_rec options to false)")


def int8_model(model: Path, cache_dir: str | Path | None = None, ranges: Path | None = None,
               reduce_range: bool = False, unsigned: bool = False, exclude: tuple[str, ...] = ()) -> Path:
    """The int8 copy of the fp32 ONNX `model` (made on the first call, then read from
    `cache_dir`, default `default_model_cache()`), with the activation ranges `ranges`
    (default: the shipped table, `ranges_path(model)`); `reduce_range`: 7-bit weights;
    `unsigned`: uint8 weights (ONNX Runtime's u8u8 kernels widen both operands to 16 bits before
    multiplying, so nothing saturates on any CPU, at full 8-bit weights); `exclude`: names of
    nodes left in fp32."""
    model = Path(model)
    ranges = Path(ranges) if ranges is not None else ranges_path(model)
    if not ranges.is_file():
        raise UserError(f"no int8 activation ranges ship for {model.name} (looked for {ranges})")
    _require_onnx()
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_model_cache()
    exclude = tuple(sorted(set(exclude)))
    kind = "int8" + ("r" if reduce_range else "") + ("u" if unsigned else "") + ("x" if exclude else "")
    out = folder / f"{model.stem}-{kind}-{_digest(model, ranges, exclude)}.onnx"
    if not out.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        _quantize(model, ranges, tmp, reduce_range=reduce_range, unsigned=unsigned, exclude=exclude)
        os.replace(tmp, out)  # atomic: a drafter in another process never loads half a model
    return out


def _quantize(model: Path, ranges: Path, out: Path, inputs: list | None = None, reduce_range: bool = False,
              unsigned: bool = False, exclude: tuple[str, ...] = ()) -> None:
    """`model` quantised into `out` with the activation ranges of the JSON table `ranges`;
    with `inputs` (dicts of input name -> array), the ranges are measured on them and
    written to `ranges` first; `reduce_range`: 7-bit weights; `unsigned`: uint8 weights;
    `exclude`: names of nodes left in fp32."""
    with tempfile.TemporaryDirectory(prefix="treedec-int8-") as tmp:
        pre = prepare(model, Path(tmp) / "pre.onnx")
        quantize_prepared(pre, ranges, out, inputs, reduce_range=reduce_range, unsigned=unsigned, exclude=exclude)


def prepare(model: Path, out: Path) -> Path:
    """`model` as it is quantised, into `out`: ONNX Runtime's pre-processing (shapes, basic graph
    optimisations), at opset `OPSET`; its node names are those `exclude` names."""
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(str(model), str(out), skip_symbolic_shape=True)
    onnx.save(version_converter.convert_version(onnx.load(str(out)), OPSET), str(out))
    return out


def quantize_prepared(pre: Path, ranges: Path, out: Path, inputs: list | None = None, reduce_range: bool = False,
                      unsigned: bool = False, exclude: tuple[str, ...] = ()) -> None:
    """The `prepare`d model `pre` quantised into `out` (as `_quantize`); a name in `exclude` that
    names no node of `pre` is an error (quantize_static would pass it over)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, items: list):
            self._it = iter(items)

        def get_next(self):
            return next(self._it, None)

    unknown = sorted(set(exclude) - {n.name for n in onnx.load(str(pre), load_external_data=False).graph.node})
    if unknown:
        raise UserError(f"int8 exclusion names no node of the model: {', '.join(unknown)}")
    quantize_static(str(pre), str(out), None if inputs is None else Reader(inputs),
                    calibration_cache_path=str(ranges), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8 if unsigned else QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, reduce_range=reduce_range,
                    nodes_to_exclude=list(exclude))


def calibrate(model: Path, inputs: list, ranges: Path) -> None:
    """Measure `model`'s activation ranges on `inputs` (dicts of input name -> array) into
    the JSON table `ranges` (what `int8_model` reads), replacing it."""
    _require_onnx()
    ranges.parent.mkdir(parents=True, exist_ok=True)
    ranges.unlink(missing_ok=True)  # quantize_static reads a table that is there instead of measuring
    with tempfile.TemporaryDirectory(prefix="treedec-int8-") as tmp:
        _quantize(Path(model), ranges, Path(tmp) / "q.onnx", inputs)
