"""MTP drafting (`mtp`, `hpd`) on runtime=vllm: the shipped MTP head served as a vLLM Medusa
draft model (treedec/runtimes/vllm/mtp.py) on the shipped model.

Without an engine: the served head drafts the embedded drafter's chain. With one (two
held-out pages): every stream's token ids equal the base strategy's on vLLM and on the
embedded engine, with drafts accepted and rejected.
"""
import json
import types

import pytest
import torch

from treedec.drafters.mtp import HEAD_DIR
from treedec.engine.draft_stats import depth_figures
from treedec.models.mtp_head import CONFIG
from treedec.models.vlm import SHIPPED
from treedec.run.stages.recording import run_with_ids

from test_vllm_backend import _vllm_or_skip, assert_same_ids

pytestmark = pytest.mark.skipif(not (SHIPPED / HEAD_DIR / CONFIG).is_file(), reason="no shipped MTP head")

PAGES, MAX_NEW = 2, 512


@pytest.fixture(scope="module")
def shipped():
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm

    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    return vlm, list(open_dataset({"name": "synth", "pages": PAGES, "seed": 1_000_000}, model_pages=vlm.pages))


def _bound(vlm, k=6):
    from treedec.drafters.mtp import MTPDrafter

    d = MTPDrafter(k)
    return d.for_run(vlm)


def test_served_head_drafts_the_embedded_chain(shipped):
    """`MTPHeadForVLLM` loaded from `draft_dir` proposes, for any hidden state, the chain
    `MTPDraftModel.chain` drafts after the token the base model picks from it."""
    from safetensors.torch import load_file

    from treedec.runtimes.vllm.engine import VLLMEngines
    from treedec.runtimes.vllm.mtp import MTPHeadForVLLM, draft_dir

    vlm, _ = shipped
    d = _bound(vlm)
    engines = VLLMEngines()
    folder = draft_dir(vlm, d, 4, engines)
    assert draft_dir(vlm, _bound(vlm), 4, engines) == folder  # one folder per head and K: the engine cache's key
    hf = types.SimpleNamespace(**json.loads((folder / "config.json").read_text()))
    cfg = types.SimpleNamespace(speculative_config=types.SimpleNamespace(
        draft_model_config=types.SimpleNamespace(hf_config=hf)))
    served = MTPHeadForVLLM(vllm_config=cfg)
    assert served.load_weights(load_file(str(folder / "model.safetensors")).items()) == \
        {n for n, _ in served.named_parameters()}
    torch.manual_seed(0)
    hidden = torch.randn(5, hf.hidden_size) * 3
    with torch.inference_mode():
        got = torch.stack([logits.argmax(-1) for logits in served(hidden)], 1).tolist()
        last = d.model.lm_head(hidden).argmax(-1).tolist()
    assert got == [d.model.chain(h, t, 4) for h, t in zip(hidden, last)]
    assert len({tuple(c) for c in got}) > 1  # not one constant chain
    engines.close()
    assert not folder.exists()  # the runtime's folders go with it


@pytest.fixture(scope="module")
def runs(shipped, vllm_engines):
    """Per MTP strategy: its vLLM run, the base's vLLM run and the base's embedded run, each
    (RunResult, ids per page)."""
    _vllm_or_skip()
    from treedec.engine.engine import EngineConfig
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import build_strategy

    vlm, samples = shipped
    cfg = VLLMConfig(max_new_tokens=MAX_NEW, max_pages=PAGES)
    out = {}
    for name, base in (("mtp", "sequential"), ("hpd", "padoc")):
        def run(runtime, strategy):
            return run_with_ids(runtime, vlm, build_strategy({"name": strategy}, vlm.tokenizer), samples)
        out[name] = (run(VLLMRuntime(cfg, SHIPPED, vllm_engines), name),
                     run(VLLMRuntime(cfg, SHIPPED, vllm_engines), base),
                     run(EmbeddedRuntime(EngineConfig(max_new_tokens=MAX_NEW, max_pages=PAGES)), base))
    return out


@pytest.mark.xdist_group("vllm")
@pytest.mark.parametrize("name", ["mtp", "hpd"])
def test_vllm_mtp_pages_equal_the_base_strategys(runs, name):
    (spec, spec_ids), (base, base_ids), (_, emb_ids) = runs[name]
    assert_same_ids(spec_ids, base_ids)  # vLLM with the head = vLLM without, token id for token id
    assert_same_ids(spec_ids, emb_ids)  # = the embedded engine's
    assert spec.runtime == "vllm" and any("medusa" in n for n in spec.notes)
    accepted, drafted = sum(r.accepted for r in spec.records), sum(r.drafted for r in spec.records)
    assert drafted > accepted > 0  # drafts both accepted and rejected
    by_depth = depth_figures(r.by_depth for r in spec.records)  # from vLLM's per-step draft metrics
    assert len(by_depth["drafts_by_depth"]) == 6 and by_depth["drafts_by_depth"][0][1] > 0
    assert sum(p for p, _ in by_depth["drafts_by_depth"]) == drafted  # every draft token at its depth
    assert sum(r.steps for r in spec.records) < sum(r.steps for r in base.records)
