from pathlib import Path

import pytest
import torch

torch.set_num_threads(2)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"


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
