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


def _outputs() -> set[str]:
    """What commands could leave in the checkout: its top-level entries and runs/'s."""
    runs = ROOT / "runs"
    return {p.name for p in ROOT.iterdir()} | ({f"runs/{n}" for n in os.listdir(runs)} if runs.is_dir() else set())


_BEFORE = _outputs()
_CACHES = {".pytest_cache", "__pycache__"}


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test wrote into the checkout anyway (runs/, outputs/, wandb/, ...)."""
    new = sorted(_outputs() - _BEFORE - _CACHES)
    if new:
        print(f"\ntests wrote into the checkout {ROOT}: {new[:5]}")
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
