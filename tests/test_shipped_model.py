"""The shipped tiny model still parses held-out pages of its training distribution: a guard
for everything it was trained with (tokenizer, serialization, prompts, engine, strategies).
The bounds are loose: on these 8 pages the shipped model (mean of steps 14200-15000) measures text edit
0.000 (padoc) and 0.000 (sequential), layout F1 0.945 and 1.000, so only a break fails them, not noise."""
import pytest
import torch

from treedec.models.vlm import SHIPPED

pytestmark = pytest.mark.skipif(not (SHIPPED / "model.safetensors").is_file(), reason="no shipped model in this checkout")

PAGES = 8


@pytest.fixture(scope="module")
def shipped():
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm

    torch.set_num_threads(1)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    samples = list(open_dataset({"name": "synth", "pages": PAGES, "seed": 1_000_000}, model_pages=vlm.pages))
    return vlm, samples


@pytest.mark.parametrize("strategy", ["sequential", "padoc"])
def test_shipped_model_reads_held_out_pages(shipped, strategy):
    from treedec.engine.engine import EngineConfig
    from treedec.results.evaluate import evaluate_pages
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.strategies.base import build_strategy

    vlm, samples = shipped
    res = run_strategy(EmbeddedRuntime(EngineConfig(max_pages=PAGES, max_new_tokens=512)),
                       vlm, build_strategy({"name": strategy}, vlm.tokenizer), samples, progress=False, warmup=False)
    assert len(res.records) == PAGES
    ev = evaluate_pages({r.name: r.page for r in res.records}, [s.page for s in samples])
    assert ev["text_edit"] < 0.4, ev["text_edit"]
    assert ev["layout_f1"] > 0.5, ev["layout_f1"]
