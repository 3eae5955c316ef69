import json
import sys

import pytest

from cli_helpers import treedec, treedec_forked
from conftest import DEMO


def _run(*args, check=True, here=True):
    """The command in this process (`here`), or in a process of its own (what a user sees, warnings
    printed by a fresh interpreter included)."""
    r = treedec(*args, here=here, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr[-2000:]
    return r


def test_depth_synth_writes_outputs(tmp_path):
    _run("depth", "data.pages=15", f"out={tmp_path}")
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["pages"] == 15
    assert 0 < s["median_fork_depth"] < s["median_sequential_depth"]
    assert s["median_reduction"] > 0.2
    assert (tmp_path / "depth_hist.png").stat().st_size > 1000
    assert (tmp_path / "config.yaml").is_file()
    assert len(list((tmp_path / "pages").glob("*.json"))) == 15


def test_depth_omnidocbench(tmp_path):
    if not DEMO.is_dir():
        pytest.skip("../shared/omnidocbench_demo is absent")
    _run("depth", "data=omnidocbench", f"data.root={DEMO}", f"out={tmp_path}")
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["pages"] == 12 and 0.3 < s["median_reduction"] < 0.9


def test_multirun_writes_one_folder_per_job(tmp_path):
    _run("depth", "-m", "data.pages=3,4", f"out={tmp_path}")
    pages = sorted(json.loads(p.read_text())["pages"] for p in tmp_path.glob("*/summary.json"))
    assert pages == [3, 4]


# caught by `validate` before Hydra starts: checked in this process (a `python -m treedec` costs seconds of imports)
EARLY_MISTAKES = [
    (["depth", "data=nope"], "choose from: images, omnidocbench, synth"),
    (["depth", "bogus=1"], "unknown key 'bogus'"),
    (["depth", "data.page.bogus=1"], "keys there: width"),
    (["depth", "data=images"], "data.root must be set"),
    (["depth", "data.page.footer_rule=maybe"], "data.page.footer_rule=maybe: Value 'maybe' is not a valid bool"),
    (["frobnicate"], "commands: depth"),
    (["run", "runtime.bogus=1"], "bogus"),
]
# caught in the job, under Hydra: checked in a process of their own
JOB_MISTAKES = [
    (["depth", "data=omnidocbench", "data.root=/no/such/dir"], "is not a folder"),
    (["depth", "data.seed=abc"], "data.seed must be a whole number, got 'abc'"),
    (["depth", "data.pages=-2"], "data.pages must be >= 1"),
    # a model with no shipped checkpoint is never replaced by the shipped tiny one (issue 22)
    (["run", "model=qwen3_vl"], "model=qwen3_vl needs model.path=DIR"),
    (["train", "model=qwen3_vl"], "model=qwen3_vl needs model.path=DIR"),
    (["train", "model=qwen3_vl", "strategy=mtp"], "model=qwen3_vl needs model.path=DIR"),
    # runtime options: defaults and checks from the runtimes' config dataclasses, one style for both
    (["run", "runtime.max_pages=0"], "runtime.max_pages must be a whole number >= 1, got 0"),
    (["run", "runtime=vllm", "runtime.max_new_tokens=-1"], "runtime.max_new_tokens must be a whole number >= 1"),
    (["run", "runtime.attention=sparse"], "runtime.attention must be auto, blocked or dense"),
]


def _one_line(code, stderr, says):
    assert code == 2
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and says in lines[0], stderr


@pytest.fixture(scope="module")
def job_mistakes(tmp_path_factory):
    """JOB_MISTAKES' command lines, each in a process of its own (forked after the imports they all
    make: what those print would be printed by each, so it must be nothing)."""
    ran, imports_said = treedec_forked([args for args, _ in JOB_MISTAKES], tmp_path_factory.mktemp("mistakes"))
    assert imports_said == ""
    return ran


@pytest.mark.parametrize("i", range(len(JOB_MISTAKES)), ids=[" ".join(a) for a, _ in JOB_MISTAKES])
def test_user_mistakes_are_one_line(job_mistakes, i):
    args, says = JOB_MISTAKES[i]
    r = job_mistakes[i]
    assert r.args == ["treedec", *args]
    _one_line(r.returncode, r.stderr, says)


@pytest.mark.parametrize("args, says", EARLY_MISTAKES)
def test_user_mistakes_caught_before_hydra_are_one_line(args, says, capsys, monkeypatch):
    from treedec.cli import main

    argv = list(sys.argv)
    monkeypatch.setattr(sys, "argv", list(argv))  # restored after, even where Hydra was started
    with pytest.raises(SystemExit) as e:
        main(args)
    assert sys.argv == argv  # refused before Hydra started (it would have been handed the command line)
    _one_line(e.value.code, capsys.readouterr().err, says)


def test_list_names_groups_and_options(capsys):
    from treedec.cli import main

    main(["list"])
    out = capsys.readouterr().out
    assert "depth" in out and "omnidocbench" in out and "wandb" in out
