"""The pipeline drafter's options that make it cheaper: int8 models made once from shipped
activation ranges (`int8_det`, `int8_rec`), and recogniser crops narrowed (`rec_squeeze`)."""
import importlib.util

import numpy as np
import pytest

from treedec.errors import UserError


def _tiny_conv(path):
    """A two-convolution ONNX model (opset 11, as rapidocr's are) with random weights."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, w2 = (numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n)
              for n, s in (("w1", (8, 3, 3, 3)), ("w2", (4, 8, 1, 1))))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["h"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["h"], ["r"], name="relu"), helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, "w"])], initializer=[w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    return path


def int8_error(tmp_path, reduce_range: bool) -> tuple[float, float]:
    """The largest error of the tiny model's int8 copy against its fp32 outputs, and 5 % of their
    largest magnitude; the copy is made once (a second call quantises nothing)."""
    import onnx
    import onnxruntime as ort

    from treedec.ocr import int8

    model = _tiny_conv(tmp_path / "tiny.onnx")
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1, 1, size=(1, 3, 16, w)).astype(np.float32) for w in (16, 24, 32)]
    int8.calibrate(model, [{"x": x} for x in xs], tmp_path / "tiny.json")
    out = int8.int8_model(model, cache_dir=tmp_path / "cache", ranges=tmp_path / "tiny.json", reduce_range=reduce_range)
    assert out.parent == tmp_path / "cache" and out.is_file() and ("-int8r-" in out.name) == reduce_range
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops  # quantised, not a copy
    run = lambda path: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": xs[0]})[0]
    fp32, q = run(model), run(out)
    assert not np.array_equal(fp32, q)
    real = int8._quantize
    int8._quantize = lambda *a, **k: pytest.fail("quantised again")
    try:
        assert int8.int8_model(model, cache_dir=tmp_path / "cache", ranges=tmp_path / "tiny.json",
                               reduce_range=reduce_range) == out
    finally:
        int8._quantize = real
    return float(np.abs(fp32 - q).max()), 0.05 * float(np.abs(fp32).max())


def test_int8_model_is_quantised_once_from_its_ranges(tmp_path, monkeypatch):
    """The int8 copy the drafter's ONNX Runtime precision uses on this CPU (7-bit weights where
    plain int8 is not measured to hold: `choice.MEASURED`) stays within 5 % of fp32's outputs, on
    every CPU (tests/test_every_cpu.py runs it as a CPU without VNNI too)."""
    pytest.importorskip("onnxruntime")
    from treedec.ocr.choice import ENGINE_VARIABLE, choose

    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)
    error, bound = int8_error(tmp_path, reduce_range=choose("onnxruntime").precision != "int8")
    assert error < bound, (error, bound)


def test_int8_with_7_bit_weights_holds_on_every_cpu(tmp_path):
    pytest.importorskip("onnxruntime")
    error, bound = int8_error(tmp_path, reduce_range=True)
    assert error < bound, (error, bound)


def test_int8_copy_leaves_the_excluded_nodes_in_fp32_once(tmp_path, monkeypatch):
    """A copy with nodes excluded (the `int8_mixed` precision) keeps them as fp32 Conv nodes (a float
    weight, no DequantizeLinear before it) while the others are quantised; it is a cache file of its
    own, made once; a name no node has is an error, not a plain int8 copy."""
    pytest.importorskip("onnxruntime")
    import onnx

    from treedec.ocr import int8

    model = _tiny_conv(tmp_path / "tiny.onnx")
    rng = np.random.default_rng(1)
    int8.calibrate(model, [{"x": rng.uniform(-1, 1, size=(1, 3, 16, 16)).astype(np.float32)}], tmp_path / "tiny.json")
    where = {"cache_dir": tmp_path / "cache", "ranges": tmp_path / "tiny.json"}
    plain, mixed = int8.int8_model(model, **where), int8.int8_model(model, exclude=("conv2",), **where)
    assert mixed != plain and "-int8x-" in mixed.name and mixed.is_file()
    graph = onnx.load(str(mixed)).graph
    made_by = {out: n.op_type for n in graph.node for out in n.output}
    weights = {i.name for i in graph.initializer}
    convs = {n.name: n for n in graph.node if n.op_type == "Conv"}
    assert convs["conv2"].input[1] in weights and convs["conv2"].input[1] not in made_by  # fp32 weight
    assert made_by[convs["conv1"].input[1]] == "DequantizeLinear"  # quantised
    monkeypatch.setattr(int8, "_quantize", lambda *a, **k: pytest.fail("quantised again"))
    assert int8.int8_model(model, exclude=("conv2",), **where) == mixed
    monkeypatch.undo()
    with pytest.raises(UserError, match="conv3"):
        int8.int8_model(model, exclude=("conv3",), **where)


def test_shipped_exclusions_name_nodes_of_their_models(tmp_path):
    """Each shipped `int8_mixed` exclusion list names Conv / MatMul nodes of its model as it is quantised."""
    for mod in ("rapidocr", "onnx", "onnxruntime"):
        pytest.importorskip(mod)
    import onnx

    from treedec.ocr import int8
    from treedec.ocr.pipeline import rapidocr_model

    for task in ("det", "rec"):
        model = rapidocr_model(task)
        if int8.exclusion_path(model).is_file():
            ops = {n.name: n.op_type for n in onnx.load(str(int8.prepare(model, tmp_path / f"{task}.onnx"))).graph.node}
            assert {ops.get(name) for name in int8.shipped_exclusion(model)} <= {"Conv", "MatMul"}, task


def test_int8_needs_onnx_and_says_so(tmp_path, monkeypatch):
    from treedec.ocr import int8

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a))
    with pytest.raises(UserError, match=r"pip install 'treedec\[hsd\]'"):
        int8.int8_model(int8.RANGES / "PP-OCRv6_rec_small.onnx", cache_dir=tmp_path)


@pytest.fixture(scope="module")
def pipeline():
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2", "onnx"):
        pytest.importorskip(mod)
    from treedec.data.synth import SynthConfig, generate_page
    from treedec.ocr.pipeline import PipelineOCR

    return PipelineOCR, generate_page(1_000_003, SynthConfig())


def _model_file(session) -> str:
    return session.session.session._model_path  # rapidocr's wrapper -> onnxruntime's session


def test_int8_options_choose_the_quantised_models(pipeline):
    import onnx

    PipelineOCR, _ = pipeline
    both = PipelineOCR(int8_det=True, int8_rec=True, engine="onnxruntime")
    both._load()
    for model in (both._ocr.text_det, both._ocr.text_rec):
        assert "-int8-" in _model_file(model)
        assert "QuantizeLinear" in {n.op_type for n in onnx.load(_model_file(model)).graph.node}
    rec_only = PipelineOCR(int8_det=False, int8_rec=True, engine="onnxruntime")
    rec_only._load()
    assert _model_file(rec_only._ocr.text_det).endswith("PP-OCRv6_det_small.onnx")
    assert _model_file(rec_only._ocr.text_rec) == _model_file(both._ocr.text_rec)
    assert both.tag != rec_only.tag


def test_rec_squeeze_narrows_what_the_recogniser_reads(pipeline):
    """The recogniser's input columns shrink by `rec_squeeze` (its cost is their width); the
    page is still read."""
    PipelineOCR, sample = pipeline
    widths = {}
    for k in (1.0, 0.75):
        ocr = PipelineOCR(rec_squeeze=k, engine="onnxruntime")  # no width buckets: the crops' own widths
        ocr._load()
        session, seen = ocr._ocr.text_rec.session, []
        ocr._ocr.text_rec.session = lambda x, run=session, seen=seen: (seen.append(x.shape), run(x))[1]
        page = ocr.draft(sample.image)
        assert any(b.content.strip() for b in page.blocks)
        assert all(s[2] == 48 for s in seen)
        widths[k] = sum(s[0] * s[3] for s in seen)
    assert 0.65 * widths[1.0] <= widths[0.75] <= 0.85 * widths[1.0], widths
