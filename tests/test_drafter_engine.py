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
    monkeypatch.delenv(ovx.ENGINE_VARIABLE, raising=False)  # the suite's conftest sets it
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

    monkeypatch.delenv(ovx.ENGINE_VARIABLE, raising=False)

    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: True)
    assert PipelineConfig().tag() == PipelineConfig(engine="openvino").tag() != PipelineConfig(engine="onnxruntime").tag()
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: False)
    assert PipelineConfig().tag() == PipelineConfig(engine="onnxruntime").tag()


def test_auto_follows_the_environment(monkeypatch):
    monkeypatch.setattr(ovx, "bf16_cpu", lambda by_default=False: True)
    monkeypatch.setenv(ovx.ENGINE_VARIABLE, "onnxruntime")
    assert ovx.engine("auto") == "onnxruntime" and ovx.engine("openvino") == "openvino"
    monkeypatch.setenv(ovx.ENGINE_VARIABLE, "auto")
    assert ovx.engine("auto") == "openvino"
    monkeypatch.setenv(ovx.ENGINE_VARIABLE, "gpu")
    with pytest.raises(UserError, match=f"bad drafter engine 'gpu' in {ovx.ENGINE_VARIABLE}"):
        ovx.engine("auto")


def test_openvino_drafter_in_a_process_of_its_own():
    """tests/openvino_checks.py: the recogniser's steps, bfloat16 on one thread, pinning, a page
    read as well as ONNX Runtime reads it, `auto` choosing OpenVINO on this CPU. In a process of
    its own: a process that has run OpenVINO may crash when it later forks (treedec/ocr/openvino.py)."""
    import subprocess
    import sys
    from pathlib import Path

    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2", "openvino", "Levenshtein"):
        pytest.importorskip(mod)
    script = Path(__file__).with_name("openvino_checks.py")
    env = {k: v for k, v in __import__("os").environ.items() if k != ovx.ENGINE_VARIABLE}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode == 3:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.split() == ["steps", "bfloat16", "pinning", "page", "auto"], done.stdout
