"""HPD-Parsing's comparison on its own checkpoint layout (issue 54, item 6), on the tiny
`internvl` replica with exactly HPD-Parsing's tokens (`python -m treedec tiny
model_type=internvl format=hpd`: `<BLOCK>`, `<FORK>`, `<CHILD>` as plain added tokens, no
treedec token, its format declared, its prompts the `hpd` format's). padoc forks on that
checkpoint's own `<FORK>`; each stream it decodes is transformers' own greedy `generate` on
the stream's context (the prompt and layout before the fork, then `<CHILD>` at the fork's
position: the sequential decoding of that context); hpd (padoc + MTP) and padoc_hsd give
padoc's ids with drafts accepted; the documented command runs. A random model writes no
layout of its own, so the HPD-form structure is forced (`ForcedTree` with the category as a
word: the model still picks every letter of the content)."""
import json

import pytest
import torch
from omegaconf import OmegaConf

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.formats import get_format
from treedec.formats.declare import model_format
from treedec.models.loader import load_vlm
from treedec.models.replicas import build_replica
from treedec.models.replicas.common import HPD_TOKENS
from treedec.run.stages import drafts_ahead
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy

from cli_helpers import treedec_here
from engine_helpers import ForcedTree
from lossless_helpers import assert_lossless, decode, fitted_head, own_drafts

PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
HEADS = ["text [62,62,938,312]", "title [62,375,938,625]", "text [62,688,938,938]"]  # HPD's category word + box
LENGTHS = [14, 9, 11]
FORCED = EngineConfig(max_new_tokens=128)
HPD = get_format("hpd")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    torch.set_num_threads(1)
    return build_replica("internvl", tmp_path_factory.mktemp("internvl_hpd"), "hpd", seed=0)


@pytest.fixture(scope="module")
def vlm(replica):
    return load_vlm(OmegaConf.create({"name": "tiny", "path": str(replica)}))  # no model.format: it declares hpd


def strategy(vlm, cfg: dict):
    return build_strategy(cfg, vlm.tokenizer, HPD)


def forced(vlm, samples) -> list:
    """Three blocks in HPD's tree form: `<BLOCK>word [box]<FORK>` each, then the end; each
    branch `<CHILD>` and the model's own letters."""
    n = len(vlm.prompt(samples[0].image, "tree").ids)
    return [ForcedTree(n, 3, LENGTHS, boxes=HEADS, tok=vlm.tokenizer, category=None)]


@pytest.fixture(scope="module")
def samples():
    return [generate_page(s, PAGE) for s in range(2)]


@pytest.fixture(scope="module")
def padoc_runs(vlm, samples):
    return decode(vlm, strategy(vlm, {"name": "padoc"}), samples, FORCED, forced(vlm, samples))


def test_the_replica_has_exactly_hpds_tokens_and_prompts(replica, vlm):
    tok = vlm.tokenizer
    assert not tok.treedec_tokens and model_format(OmegaConf.create({"name": "tiny"}), vlm).name == "hpd"
    assert set(tok.added) - set(tok.hf.all_special_tokens) == set(HPD_TOKENS)  # plain added tokens, nothing else
    assert all(tok.is_token(t) for t in HPD_TOKENS) and (tok.block_id, tok.fork_id, tok.child_id) == tuple(
        tok.vocab[t] for t in HPD_TOKENS)
    assert "<eos>" not in tok.vocab and "<|text_block|>" not in tok.vocab and tok.eos_ids == (tok.vocab["<|im_end|>"],)
    assert vlm.prompt_text("tree").endswith("document parsing with fork.<|im_end|>\n<|im_start|>assistant\n")
    assert "document parsing.<|im_end|>" in vlm.prompt_text("flat")
    assert json.loads((replica / "treedec_format.json").read_text()) == {"format": "hpd"}


def test_padoc_forks_on_hpds_token_and_each_stream_is_transformers_generate(vlm, samples, padoc_runs):
    """Per stream: transformers' greedy `generate` (same processor, the page's image features)
    on the stream's context gives exactly the stream's ids; the page reads back as HPD's."""
    tok = vlm.tokenizer
    padoc = strategy(vlm, {"name": "padoc"})
    for s in samples:
        g = padoc_runs[s.name].graph
        assert len(g.streams) == 4 and all(b.tokens[0] == tok.child_id for b in g.streams[1:])
        extra = vlm.family.generate_inputs(torch.tensor([g[0].tokens[:g[0].prompt_len]]), vlm.image_inputs(s.image),
                                           tok.image_id)
        for st in g.streams:
            context = (g[0].tokens[:st.prompt_len] if st.parent is None
                       else g[st.parent].tokens[:st.fork_at] + [tok.child_id])
            ids = torch.tensor([context])
            out = vlm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **extra, max_new_tokens=128,
                                     do_sample=False, eos_token_id=list(tok.eos_ids), pad_token_id=tok.pad_id,
                                     logits_processor=forced(vlm, samples))
            assert out[0, ids.shape[1]:].tolist() == st.tokens[st.prompt_len:]  # a branch's prompt: its <CHILD>
        text, result = padoc.parse(g, *s.image.size)
        assert text.count("<CHILD>") == 3 and "<FORK>" not in text and not result.repairs, (text, result.repairs)
        assert [b.category for b in result.page.blocks] == ["text_block", "title", "text_block"]
        assert [len(b.content) for b in result.page.blocks] == LENGTHS  # one letter a token


@pytest.fixture(scope="module")
def head(vlm, tmp_path_factory):
    """An MTP head fitted briefly on the model's own forced output on pages other than `samples`'."""
    other = [generate_page(s, PAGE) for s in (2, 3)]
    return fitted_head(vlm, {"padoc": (strategy(vlm, {"name": "padoc"}), forced(vlm, other))}, other, FORCED,
                       tmp_path_factory.mktemp("mtp"))


@pytest.mark.parametrize("name", ["hpd", "padoc_hsd"])
def test_speculation_gives_padocs_ids_with_drafts_accepted(vlm, samples, padoc_runs, head, name):
    """hpd: MTP drafts from the fitted head in every stream; padoc_hsd: drafts from padoc's own
    pages (corrupted), rendered and matched in HPD's text. Both made for the run as a run makes them."""
    cfg = {"name": "hpd", "head": head, "k": 3} if name == "hpd" else {"name": "padoc_hsd", "drafts": "oracle",
                                                                      "stage1": False}  # hpd has no crop prompt
    pages = own_drafts(samples, padoc_runs, strategy(vlm, {"name": "padoc"})) if name == "padoc_hsd" else samples
    spec, _ = drafts_ahead(EmbeddedRuntime(EngineConfig(max_new_tokens=24)), vlm, strategy(vlm, cfg), pages)
    assert spec.format.name == "hpd"
    assert_lossless(padoc_runs, decode(vlm, spec, pages, FORCED, forced(vlm, samples)))


def test_the_documented_command_runs(replica, head, tmp_path):
    """docs/papers.md's command (a page folder, hpd with the head against sequential), its
    format the one the checkpoint declares: every page of both strategies written."""
    pages = tmp_path / "pages"
    pages.mkdir()
    generate_page(0, PAGE).image.save(pages / "p0.png")
    r = treedec_here("run", f"model.path={replica}", "model.format=hpd", "strategy=hpd", f"strategy.head={head}",
                     "strategy.k=3", "compare=sequential", "data=images", f"data.root={pages}",
                     "runtime.max_new_tokens=12", f"out={tmp_path / 'o'}")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["pages"] == 1, summary
