"""What a run leaves behind and prints: a config error leaves no run folder, no empty log
file is left, library INFO lines (the OCR's, with ANSI colours) go to the log, not the terminal."""
import json
import logging
import os
import subprocess
import sys

from cli_helpers import treedec_forked
from conftest import ROOT
from treedec.ocr.library_logs import to_log
from treedec.run.outputs import discard_start


def _treedec(*args):
    return subprocess.run([sys.executable, "-m", "treedec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_a_config_error_leaves_no_run_folder(tmp_path):
    runs = tmp_path / "runs"  # the default out= (the second command line's), under $TREEDEC_RUNS
    lines = [["run", "model=qwen3_vl", f"out={tmp_path / 'r'}"], ["run", "model=qwen3_vl"]]
    (r, default), imports_said = treedec_forked(lines, tmp_path, env={"OMP_NUM_THREADS": "1", "TREEDEC_RUNS": str(runs)})
    assert imports_said == ""  # (what each process would print first)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "treedec: error: model=qwen3_vl needs model.path=DIR (a local checkpoint folder); only model=tiny has a "
        "shipped default"]
    assert not (tmp_path / "r").exists()
    assert default.returncode == 2 and (not runs.exists() or not any(runs.iterdir()))


def test_a_folder_with_results_is_kept(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "p.json").write_text("{}")
    (tmp_path / "config.yaml").write_text("")
    assert not discard_start(tmp_path, "run.log") and (tmp_path / "pages" / "p.json").is_file()
    (tmp_path / "pages" / "p.json").unlink()
    (tmp_path / "summary.json").write_text("{}")
    assert not discard_start(tmp_path, "run.log") and (tmp_path / "config.yaml").is_file()
    (tmp_path / "summary.json").unlink()
    (tmp_path / "run.log").write_text("x")
    assert discard_start(tmp_path, "run.log") and not tmp_path.exists()


def test_compare_leaves_no_empty_log(tmp_path):
    job = tmp_path / "sweep" / "j"
    job.mkdir(parents=True)
    (job / "result.json").write_text(json.dumps({"key": "k", "overrides": ["strategy=padoc"], "summary": {"strategy": "padoc"}}))
    r = _treedec("compare", f"runs={tmp_path / 'sweep'}", f"out={tmp_path / 'out'}")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "out" / "compare.log").exists()
    assert "[INFO]" not in r.stdout + r.stderr


def test_library_lines_go_to_the_log_without_colour_codes(capfd, caplog):
    def library_import():  # what rapid_layout's logger module does on import: its own coloured stderr handler
        lib = logging.getLogger("RapidLayoutTest")
        lib.propagate = False
        lib.setLevel(logging.INFO)
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("\x1b[32m[%(levelname)s] %(message)s\x1b[0m"))
        lib.addHandler(handler)
        return lib

    with caplog.at_level(logging.INFO, logger="treedec.ocr"), to_log():
        lib = library_import()
        lib.info("Using engine_name: onnxruntime")
        lib.warning("model file is old")
    assert capfd.readouterr().err == ""
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "treedec.ocr"]
    assert got == [(logging.INFO, "[INFO] Using engine_name: onnxruntime"),
                   (logging.WARNING, "[WARNING] model file is old")]
    assert not lib.handlers and lib.propagate and lib.level == logging.WARNING  # later: warnings up, through logging
