"""The pipeline drafter's engine (`engine`: OpenVINO in bfloat16 where the CPU has it, else
ONNX Runtime), the recogniser's width buckets on OpenVINO, and where a character sits on the
page from the recogniser's output columns (`column_xs`)."""
import numpy as np
import pytest

from treedec.errors import UserError
from treedec.ocr import openvino as ovx
from treedec.ocr.fixed_pitch import column_xs


class _Info:  # rapidocr's WordInfo: what column_xs reads
    def __init__(self, words, cols, length):
        self.words, self.word_cols, self.line_txt_len = words, cols, length


def test_column_xs_places_each_character_at_its_column():
    xs = column_xs("ab c", 100.0, 200.0, _Info([["a", "b"], ["c"]], [[1, 3], [7]], 10))
    assert xs == pytest.approx([115.0, 135.0, 155.0, 175.0])  # the space halfway between b and c
    assert column_xs("abd", 100.0, 200.0, _Info([["a", "b", "c"]], [[1, 3, 7]], 10)) is None  # another text
    assert column_xs("ab", 100.0, 200.0, _Info([["a", "b"]], [[1, 3]], 0)) is None  # no columns


def test_width_buckets_pad_to_a_multiple_and_cut_the_output_back():
    seen = []

    def session(x):  # a recogniser: one step per 8 px, as PP-OCR's (steps())
        seen.append(x.shape)
        return np.arange(x.shape[0] * ovx.steps(x.shape[-1]) * 3, dtype=np.float32).reshape(x.shape[0], -1, 3)

    out = ovx.WidthBuckets(session, 64)(np.ones((2, 3, 48, 130), np.float32))
    assert seen == [(2, 3, 48, 192)] and out.shape == (2, ovx.steps(130), 3)
    assert ovx.WidthBuckets(session, 64)(np.ones((1, 3, 48, 128), np.float32)).shape == (1, 16, 3)  # a multiple: as is


def test_engine_choice_is_checked_and_resolved(monkeypatch):
    with pytest.raises(UserError, match="bad drafter engine 'gpu'"):
        ovx.engine("gpu")
    assert ovx.engine("onnxruntime") == "onnxruntime"
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: False)
    assert ovx.engine("auto") == "onnxruntime"
    with pytest.raises(UserError, match="engine=onnxruntime"):
        ovx.engine("openvino")
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: True)
    assert ovx.engine("auto") == "openvino"
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: not by_default)  # AVX-512 BF16 without AMX
    assert ovx.engine("auto") == "onnxruntime" and ovx.engine("openvino") == "openvino"


def test_bad_drafter_options_are_one_line_errors():
    from treedec.ocr.pipeline import PipelineConfig

    for bad, words in (({"engine": "gpu"}, "bad drafter engine 'gpu'"), ({"rec_batch": 0}, "rec_batch=0: at least 1"),
                       ({"rec_width": 8}, "rec_width=8: at least 16"), ({"threads": 0}, "threads=0")):
        with pytest.raises(UserError, match=words):
            PipelineConfig(**bad)


def test_the_drafter_starts_without_the_metrics_package():
    """Importing the drafter imports no scipy (the metrics package's): 0.35 CPU-s a process."""
    import subprocess
    import sys

    code = "import sys, treedec.ocr.pipeline; print(sorted(m for m in ('scipy', 'treedec.metrics') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_the_tag_holds_the_resolved_engine(monkeypatch):
    from treedec.ocr.pipeline import PipelineConfig

    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: True)
    assert PipelineConfig().tag() == PipelineConfig(engine="openvino").tag() != PipelineConfig(engine="onnxruntime").tag()
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: False)
    assert PipelineConfig().tag() == PipelineConfig(engine="onnxruntime").tag()


@pytest.fixture(scope="module")
def openvino_drafter():
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2", "openvino"):
        pytest.importorskip(mod)
    if not ovx.bf16_cpu():
        pytest.skip("this CPU has no bfloat16: the drafter runs on ONNX Runtime here")
    from treedec.ocr.pipeline import PipelineOCR

    ocr = PipelineOCR(engine="openvino")
    ocr._load()
    return ocr


def test_steps_is_the_recognisers_own_output_length(openvino_drafter):
    """On a model of its own: OpenVINO 2026.4 serves wrong outputs ever after when its first
    input is under 16 px wide (one output step); the drafter's are at least 48 (`rec_width`)."""
    import openvino as ov

    from treedec.ocr.pipeline import rapidocr_model

    run = ov.Core().compile_model(str(rapidocr_model("rec")), "CPU", {"INFERENCE_NUM_THREADS": 1}).create_infer_request()
    for width in range(48, 400, 9):
        run.infer([np.zeros((1, 3, 48, width), np.float32)])
        assert run.get_output_tensor().data.shape[1] == ovx.steps(width), width


def test_openvino_models_compute_in_bfloat16_on_one_thread(openvino_drafter):
    import openvino as ov

    ocr = openvino_drafter
    compiled = [ocr._ocr.text_det.session.session.get_compiled_model(),
                ocr._ocr.text_rec.session.session.session.get_compiled_model(), ocr._layout.session.compiled_model]
    for c in compiled:
        assert c.get_property("INFERENCE_PRECISION_HINT") == ov.Type.bf16
        assert int(c.get_property("INFERENCE_NUM_THREADS")) == 1


def test_pinning_compiles_a_model_again_in_bfloat16_on_one_thread(openvino_drafter):
    """What a CPU whose OpenVINO defaults are not bfloat16 gets (on AMX the defaults already are)."""
    import openvino as ov

    from treedec.ocr.pipeline import rapidocr_model

    core = ov.Core()
    model = core.read_model(str(rapidocr_model("rec")))
    f32 = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2})
    again = ovx._bf16(f32, model, 1)
    assert again.get_property("INFERENCE_PRECISION_HINT") == ov.Type.bf16
    assert int(again.get_property("INFERENCE_NUM_THREADS")) == 1
    assert ovx._bf16(again, model, 1) is None  # already so: not compiled again


def test_openvino_reads_a_page_as_well_as_onnxruntime(openvino_drafter):
    """bfloat16 models, width buckets, batches of 2: the page read about as ONNX Runtime's
    fp32 models read it (on this page one formula's crop reads differently) and no farther from
    the truth (the drafts differ: another drafter tag). docs/results.md measures it on the demo pages."""
    import Levenshtein

    from treedec.data.synth import SynthConfig, generate_page
    from treedec.ocr.pipeline import PipelineOCR

    sample = generate_page(1_000_003, SynthConfig())
    text = lambda page: "\n".join(b.content for b in page.blocks)
    ov_text, truth = text(openvino_drafter.draft(sample.image)), text(sample.page)
    ort = PipelineOCR(engine="onnxruntime", int8_det=False, int8_rec=False)
    ort_text = text(ort.draft(sample.image))
    assert len(ov_text) > 200 and openvino_drafter.tag != ort.tag
    assert Levenshtein.distance(ov_text, ort_text) <= 0.05 * len(ort_text)
    assert Levenshtein.distance(ov_text, truth) <= Levenshtein.distance(ort_text, truth) + 0.01 * len(truth)
