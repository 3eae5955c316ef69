"""experiments/profile_drafter.py on one demo page and one synthetic page: every stage is
there and the stages plus what lies outside them add up to the CPU per page."""
import json
import sys

import pytest

from conftest import DEMO, load_script


def test_profile_stages_add_up(tmp_path, monkeypatch):
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
        pytest.importorskip(mod)
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    script = load_script("experiments/profile_drafter.py")
    monkeypatch.setattr(sys, "argv", ["profile_drafter.py", "--demo-limit", "1", "--synth", "1", "--out", str(tmp_path)])
    script.main()
    rows = json.loads((tmp_path / "profile_drafter.json").read_text())["rows"]
    assert [r["set"] for r in rows] == ["omnidocbench_demo", "synthetic"]
    for r in rows:
        assert r["pages"] == 1 and set(r["stages"]) == set(script.STAGE_ORDER)
        assert r["stages"]["detection"] > 0 and r["stages"]["recognition"] > 0 and r["stages"]["load"] > 0
        assert r["onnxruntime_threads"] == {"intra_op": 1, "inter_op": 1}
        assert abs(sum(r["stages"].values()) + r["outside_stages"] - r["cpu_s_per_page"]) < 0.01
    md = (tmp_path / "profile_drafter.md").read_text()
    assert "| omnidocbench_demo | 1 |" in md and "intra-op threads 1" in md
