"""The repository stays light (scripts/check_repo_weight.py): a tracked file over 50 MB,
shipped weights over 80 MB in all or stored in full precision, or a tracked training history
fails the suite."""
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, load_script

SCRIPT = ROOT / "scripts" / "check_repo_weight.py"
check = load_script("scripts/check_repo_weight.py")

MB = check.MB


def test_limits_are_enforced():
    assert check.problems({"a.py": 10, "treedec/assets/models/tiny/model.safetensors": 22 * MB}) == []
    big = check.problems({"runs/ckpt.pt": 51 * MB})
    assert len(big) == 1 and "runs/ckpt.pt: 51.0 MB" in big[0]
    heavy = check.problems({f"treedec/assets/models/v{i}/model.safetensors": 30 * MB for i in range(3)})
    assert len(heavy) == 1 and "shipped weights 90.0 MB in all" in heavy[0]
    assert check.problems({f"tests/assets/m{i}/model.safetensors": 30 * MB for i in range(3)}) == []  # not shipped
    history = check.problems({"a.py": 10, "experiments/runs/qwen/training_history.jsonl": 5 * MB,
                              "treedec/assets/models/tiny/training_history.jsonl": 5 * MB})
    assert len(history) == 2 and all("training history is not tracked" in p for p in history)
    assert check.problems({"treedec/assets/models/tiny/training_summary.json": 10}) == []


def test_full_precision_shipped_weights_fail_the_weight_check():
    name = "treedec/assets/models/tiny/model.safetensors"
    assert check.problems({name: 11 * MB}, {name: {"F16"}}) == []
    assert check.problems({"tests/assets/m/model.safetensors": 1}, {"tests/assets/m/model.safetensors": {"F32"}}) == []
    found = check.problems({name: 22 * MB}, {name: {"F32", "I64"}})
    assert len(found) == 1 and "stored as F32;" in found[0] and "half precision" in found[0]


def test_this_checkout_is_within_the_limits():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr  # training histories included
