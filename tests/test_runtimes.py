"""The runtime contract without running a model: both runtimes implement `Runtime`, config
picks one by name, the page limits have one source (the dataclasses, which the YAML configs
take), and the one place that says where vLLM runs a strategy differently says it."""
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from treedec.engine.engine import EngineConfig
from treedec.engine.limits import PageLimits
from treedec.errors import UserError
from treedec.runtimes.base import Runtime
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.runtimes.select import make_runtime
from treedec.runtimes.vllm.engine import VLLMConfig
from treedec.runtimes.vllm.runtime import VLLMRuntime
from treedec.strategies.base import build_strategy
from treedec.tokenizer import Tokenizer

LIMITS = ("max_pages", "max_new_tokens", "max_branches", "max_page_tokens")


def _runtime_cfg(name: str):
    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        return compose("run", overrides=[f"runtime={name}"]).runtime


@pytest.mark.parametrize("name, cls", [("embedded", EmbeddedRuntime), ("vllm", VLLMRuntime)])
def test_config_picks_a_runtime_with_the_one_set_of_defaults(name, cls):
    cfg = _runtime_cfg(name)
    runtime = make_runtime(cfg)
    assert type(runtime) is cls and runtime.name == name and isinstance(runtime, Runtime)
    default = PageLimits()
    assert {k: cfg[k] for k in LIMITS} == {k: getattr(default, k) for k in LIMITS}
    assert {k: getattr(runtime.cfg, k) for k in LIMITS} == {k: getattr(default, k) for k in LIMITS}
    assert {k: getattr(EngineConfig(), k) for k in LIMITS} == {k: getattr(VLLMConfig(), k) for k in LIMITS}


@pytest.mark.parametrize("cfg, says", [({"name": "tpu"}, "unknown runtime 'tpu'"),
                                       ({"name": "embedded", "max_pages": 0}, "runtime.max_pages must be"),
                                       ({"name": "vllm", "max_page_tokens": 0}, "runtime.max_page_tokens must be"),
                                       ({"name": "vllm", "block_sise": 16}, "runtime=vllm has no option(s) block_sise"),
                                       ({"name": "embedded", "attention": "sparse"}, "runtime.attention must be")])
def test_bad_runtime_configs_are_one_line_errors(cfg, says):
    with pytest.raises(UserError) as e:
        make_runtime(OmegaConf.create(cfg))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_vllm_says_where_it_runs_a_strategy_differently():
    tok = Tokenizer()
    hsd = build_strategy({"name": "hsd"}, tok)
    notes = VLLMRuntime().notes(hsd)
    assert any("linear chain" in n for n in notes) and any("matched together" in n for n in notes)
    assert any("draft_len=adaptive" in n for n in notes) and any("fuzzy" in n for n in notes)
    plain = build_strategy({"name": "padoc_hsd", "stage1": False, "fuzzy": 0, "layout": "ngram"}, tok)
    assert [n.split(":")[1].split()[0] for n in VLLMRuntime().notes(plain)] == ["drafts"] * 2  # chains, pages
    assert VLLMRuntime().notes(build_strategy({"name": "padoc"}, tok)) == []
    assert EmbeddedRuntime().notes(hsd) == []
