import atexit
import base64
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
# The pipeline drafter on ONNX Runtime in the suite's processes: a worker that has run OpenVINO
# crashed in later tests that fork (treedec/ocr/openvino.py); tests/openvino_checks.py checks
# OpenVINO in processes of its own (tests/test_drafter_engine.py).
os.environ["TREEDEC_DRAFTER_ENGINE"] = "onnxruntime"
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


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: runs with -p no:xdist have no such hook
def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist loadfile` (opt-in: the README's `-n 2` is xdist's `load`, which splits a module
    wherever a batch of tests ends and makes its module fixtures on both workers): a test module's
    tests on one worker, and the vLLM modules (tests/test_vllm_*.py, whose session fixture
    `vllm_engines` starts engines) all on one, so each engine starts once. (Their `xdist_group` marks
    do nothing under pytest 9: xdist 3.8 names the group in `item._nodeid`, which pytest 9 no longer
    reads.) Units with the most tests go first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModulesAndVLLM(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "vllm" if Path(module).name.startswith("test_vllm_") else module

    return ModulesAndVLLM(config, log)


def load_script(path: str):
    """A script of the repository (not a package module: scripts/, experiments/) imported by
    its path relative to the root, e.g. load_script("scripts/half_weights.py")."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_tiktoken(path: Path, merges=()) -> Path:
    """A tiktoken rank file at `path`: the 256 bytes, then `merges` (each a pair of lower-ranked tokens)."""
    tokens = [bytes([b]) for b in range(256)] + list(merges)
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(tokens)))
    return path


def run_forced(vlm, name: str, samples, **options):
    """`name` on `samples` with a forced model on the embedded engine, limits raised for the demo pages;
    HSD's drafts from the ground truth (the pipeline OCR reads a demo page in about a minute here)."""
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedConfig, EmbeddedRuntime
    from treedec.strategies.base import build_strategy

    if name in ("hsd", "padoc_hsd"):
        options = {"drafts": "oracle", **options}
    rt = EmbeddedRuntime(EmbeddedConfig(max_pages=len(samples), max_new_tokens=12000, max_branches=4096))
    return run_strategy(rt, vlm, build_strategy({"name": name, **options}, vlm.tokenizer), samples, progress=False,
                        warmup=False, cold_drafts=False)


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


@pytest.fixture(scope="session")
def vllm_engines():
    """The vLLM engines of the session's vLLM runs (`VLLMEngines`: one takes 20-90 s to start),
    shared by every test module's runtimes and closed after the last."""
    from treedec.runtimes.vllm.engine import VLLMEngines

    engines = VLLMEngines()
    yield engines
    engines.close()


@pytest.fixture(scope="module")
def pipeline_drafters():
    """A test module's pipeline drafters (`treedec.ocr.drafters.Drafters`): each in-process drafter
    and pool of drafting processes started (models loaded) once for the module, not once per HSD
    strategy; give them to a strategy with `shared_drafters`."""
    from treedec.ocr.drafters import Drafters

    owner = Drafters()
    yield owner
    owner.close()


def shared_drafters(strategy, drafters):
    """`strategy` (an HSD one) drafting with `drafters` (the module's) instead of its own."""
    strategy.before.drafters = drafters
    return strategy
