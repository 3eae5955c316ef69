"""The pipeline drafter's engine and precision (`choice.py`: by the CPU's kind, as measured), the
recogniser's width buckets on OpenVINO, and where a character sits on the page from the
recogniser's output columns (`column_xs`)."""
import numpy as np
import pytest

from treedec.errors import UserError
from treedec.ocr import choice, openvino as ovx
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


@pytest.fixture
def anywhere(monkeypatch):
    """Every pair runs here (OpenVINO installed, bfloat16), and no TREEDEC_DRAFTER_ENGINE."""
    monkeypatch.delenv(choice.ENGINE_VARIABLE, raising=False)  # the suite's conftest sets it
    monkeypatch.setattr(choice, "_runs_here", lambda engine, precision: True)


def test_auto_takes_each_kind_s_cheapest_measured_pair(anywhere):
    for kind, pairs in choice.MEASURED.items():
        chosen = choice.choose(kind=kind)
        assert (chosen.engine, chosen.precision) == pairs[0] and kind in chosen.why
        ort = choice.choose("onnxruntime", kind=kind)  # the engine fixed: its cheapest precision that held
        assert (ort.engine, ort.precision) == next(p for p in pairs if p[0] == "onnxruntime")
    # a CPU with neither bfloat16 nor VNNI never gets int8 copies unasked (they lost drafts there)
    assert all(p[1] not in choice.INT8 for p in choice.MEASURED["avx2"])
    assert choice.choose("onnxruntime", "int8", kind="avx2").why == "asked for"


def test_int8_options_off_mean_fp32(anywhere):
    for kind in choice.MEASURED:
        chosen = choice.choose("onnxruntime", int8=False, kind=kind)
        assert chosen.precision == "fp32", (kind, chosen)


def test_pairs_that_cannot_run_here_are_one_line_errors(monkeypatch):
    monkeypatch.delenv(choice.ENGINE_VARIABLE, raising=False)
    with pytest.raises(UserError, match="bad drafter engine 'gpu'"):
        choice.choose("gpu")
    with pytest.raises(UserError, match="bad drafter precision 'fp8'"):
        choice.choose(precision="fp8")
    with pytest.raises(UserError, match="bfloat16 runs on OpenVINO"):
        choice.choose("onnxruntime", "bf16")
    monkeypatch.setattr(ovx, "bf16_cpu", lambda: False)
    with pytest.raises(UserError, match="cannot run on this CPU"):
        choice.choose(precision="bf16", kind="avx2")
    monkeypatch.setattr(ovx, "installed", lambda: False)
    chosen = choice.choose(kind="amx")  # no OpenVINO: the cheapest ONNX Runtime pair measured there
    assert chosen.engine == "onnxruntime"


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


def test_the_tag_holds_the_resolved_pair(anywhere, monkeypatch):
    from treedec.ocr.pipeline import PipelineConfig

    monkeypatch.setattr("treedec.cpu.cpu_info", lambda: {"kind": "amx"})
    assert PipelineConfig().tag() == PipelineConfig(engine="openvino", precision="bf16").tag()
    assert PipelineConfig().tag() != PipelineConfig(engine="onnxruntime").tag()
    assert PipelineConfig(engine="onnxruntime").tag() == PipelineConfig(engine="onnxruntime", precision="int8").tag()
    monkeypatch.setattr("treedec.cpu.cpu_info", lambda: {"kind": "avx2"})
    assert PipelineConfig(engine="onnxruntime").tag() == PipelineConfig(engine="onnxruntime", precision="fp32").tag()
    assert PipelineConfig().tag() == PipelineConfig(engine="onnxruntime", precision="fp32").tag()  # MEASURED["avx2"]
    assert PipelineConfig().tag() != PipelineConfig(engine="openvino", precision="fp32").tag()


def test_auto_follows_the_environment(anywhere, monkeypatch):
    monkeypatch.setenv(choice.ENGINE_VARIABLE, "onnxruntime")
    assert choice.choose(kind="amx").engine == "onnxruntime"
    assert choice.choose("openvino", kind="amx").engine == "openvino"
    monkeypatch.setenv(choice.ENGINE_VARIABLE, "auto")
    assert choice.choose(kind="amx").engine == "openvino"
    monkeypatch.setenv(choice.ENGINE_VARIABLE, "gpu")
    with pytest.raises(UserError, match=f"bad drafter engine 'gpu' in {choice.ENGINE_VARIABLE}"):
        choice.choose()


def test_openvino_drafter_in_a_process_of_its_own():
    """tests/openvino_checks.py: the recogniser's steps, bfloat16 (fp32 without it) on one thread,
    pinning, a page read as well as ONNX Runtime reads it, `auto` choosing its measured pair. In a process of
    its own: a process that has run OpenVINO may crash when it later forks (treedec/ocr/openvino.py)."""
    import subprocess
    import sys
    from pathlib import Path

    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2", "openvino", "Levenshtein"):
        pytest.importorskip(mod)
    script = Path(__file__).with_name("openvino_checks.py")
    env = {k: v for k, v in __import__("os").environ.items() if k != choice.ENGINE_VARIABLE}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.split() == ["steps", "precision", "pinning", "page", "auto"], done.stdout
