"""A page's work is bounded (issue 33, item 7): `runtime.max_page_tokens` (default 4 x
max_new_tokens) cuts a page at that many tokens over all its streams, every stream still
decoding ended, and flags it; the page is kept and its flag shows in its record, its page
file and the run's summary. The key's default on both runtimes: tests/test_runtimes.py."""
import pytest
import torch

from treedec.commands.run_inputs import input_figures
from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.models.vlm import VLM, VLMSpec
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy

SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)
PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)


def forks_wildly(vlm: VLM) -> VLM:
    """Random weights whose head favours `<FORK>` (a badly trained model): every stream writes
    `<FORK>` at every step, so under a rule that forks at any depth every token starts a branch."""
    fork = vlm.tokenizer.fork_id

    def favour_fork(module, inputs, logits):
        logits = logits.clone()
        logits[..., fork] += 100.0
        return logits

    vlm.model.get_output_embeddings().register_forward_hook(favour_fork)
    return vlm


def test_a_page_that_forks_wildly_is_cut_at_its_token_budget():
    """table_cells on a model that forks at every token: without a page budget the page runs
    to 128 branches x max_new_tokens (8192 tokens, 71 steps here; 524k tokens at the default
    4096); with the default budget it ends at 4 x 64 tokens in a few steps, flagged, kept."""
    torch.set_num_threads(1)
    vlm = forks_wildly(VLM.tiny(SPEC, seed=5))
    samples = [generate_page(0, PAGE)]
    res = EmbeddedRuntime(EngineConfig(max_new_tokens=64)).run(vlm, build_strategy({"name": "table_cells"},
                                                                                    vlm.tokenizer),
                                                                samples, progress=False, warmup=False)
    [rec] = res.records
    assert rec.streams > 64 and rec.generated == 4 * 64 and rec.steps < 64, (rec.streams, rec.generated, rec.steps)
    flag = next(f for f in rec.flags if "max_page_tokens=256" in f)
    assert flag.startswith("cut: page") and rec.figures()["flags"] == rec.flags
    assert input_figures(samples, res.records)["page_flags"][rec.name] == rec.flags  # summary.json's page_flags


def test_the_budget_defaults_to_a_multiple_of_max_new_tokens_and_refuses_nonsense():
    assert EngineConfig(max_new_tokens=10).page_tokens == 40 and EngineConfig(max_page_tokens=7).page_tokens == 7
    for bad in (0, -1, 2.5, True):
        with pytest.raises(UserError, match="runtime.max_page_tokens must be a whole number >= 1 or null") as e:
            EngineConfig(max_page_tokens=bad)
        assert "\n" not in str(e.value)
