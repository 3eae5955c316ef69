import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

torch.set_num_threads(2)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"

# Commands run without out=DIR write under $TREEDEC_RUNS (default ./runs): a scratch folder for the
# suite, inherited by the commands the tests start, so the suite leaves nothing in the checkout.
_SCRATCH = tempfile.mkdtemp(prefix="treedec-test-runs-")
os.environ["TREEDEC_RUNS"] = _SCRATCH
atexit.register(shutil.rmtree, _SCRATCH, True)
_RUNS_BEFORE = set(os.listdir(ROOT / "runs")) if (ROOT / "runs").is_dir() else set()


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test wrote into the checkout's runs/ folder anyway."""
    now = set(os.listdir(ROOT / "runs")) if (ROOT / "runs").is_dir() else set()
    if now - _RUNS_BEFORE:
        print(f"\ntests wrote into {ROOT / 'runs'}: {sorted(now - _RUNS_BEFORE)[:5]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def load_script(path: str):
    """A script of the repository (not a package module: scripts/, experiments/) imported by
    its path relative to the root, e.g. load_script("scripts/half_weights.py")."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def demo_pages():
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    from treedec.io import load_omnidocbench

    return load_omnidocbench(DEMO / "OmniDocBench_demo.json")


@pytest.fixture(scope="session")
def synth_pages():
    from treedec.data.synth import SynthConfig, generate_page

    cfgs = [SynthConfig(), SynthConfig(columns="two", width=512, height=640), SynthConfig(columns="one", text_mode="random")]
    return [generate_page(s, cfgs[s % 3], render=False).page for s in range(60)]
