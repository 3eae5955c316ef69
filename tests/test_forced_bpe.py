"""The forced model under a real VLM's BPE (`model=forced model.tokenizer=PATH`): its targets are
that tokenizer's ids, its LM head has that vocabulary, and every strategy still returns the ground
truth exactly, on synthetic pages and on real demo pages (bytes beyond ASCII: Chinese, symbols).
The BPE is built here from a tiny tiktoken rank file (bytes and letter pairs)."""
import string

import pytest

from cli_helpers import treedec_here
from conftest import DEMO, run_forced as run, write_tiktoken
from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.formats.contract import page_to_flat
from treedec.models.bpe_tokenizer import ROW_TAGS
from treedec.models.forced import ForcedModel
from treedec.models.qwen3_vl import REQUIRED_TOKENS
from treedec.models.vlm import MODES
from treedec.tokenizer import IMAGE

STRATEGIES = ("sequential", "padoc", "table_rows", "crops", "padoc_hsd")
SYNTH = {"name": "synth", "pages": 3, "seed": 0, "page": {"width": 256, "height": 256, "regions": [2, 4]}}
LETTERS = string.ascii_letters.encode()


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory):
    return write_tiktoken(tmp_path_factory.mktemp("bpe") / "pairs.tiktoken", [bytes([a, b]) for a in LETTERS for b in LETTERS])


@pytest.fixture(scope="module")
def models(rank_file):
    return {"char": ForcedModel("1m", vision_tokens=16), "bpe": ForcedModel("1m", vision_tokens=16, tokenizer=str(rank_file))}


def test_the_lm_head_has_the_bpe_s_vocabulary(models):
    bpe = models["bpe"]
    added = (*REQUIRED_TOKENS, IMAGE, *MODES.values(), *ROW_TAGS)
    assert len(bpe.tokenizer) == 256 + len(LETTERS) ** 2 + len(set(added))  # bytes, letter pairs, treedec's tokens
    vocab = bpe.model.get_output_embeddings().weight.shape[0]
    assert len(bpe.tokenizer) <= vocab < len(bpe.tokenizer) + 64
    for token in added:
        assert bpe.tokenizer.is_token(token), token


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_strategy_returns_the_ground_truth_under_the_bpe(models, name):
    samples = list(open_dataset(SYNTH))
    res = run(models["bpe"], name, samples)
    for rec, s in zip(res.records, samples):
        assert not rec.flags and rec.text == page_to_flat(s.page), name
    if name == "padoc_hsd":  # drafts, tokenized by the BPE, accepted where they equal the forced ids
        assert sum(r.accepted for r in res.records) > 0


def test_the_forced_ids_are_the_tokenizer_s(models):
    """sequential's steps on a page are its flat form's tokens under the model's own tokenizer: fewer
    under the BPE on pages without tables (letter pairs merged; treedec's character tokenizer has
    HTML table tags as one token each, which this BPE spells byte by byte)."""
    samples = list(open_dataset(SYNTH))
    steps = {}
    for tk, m in models.items():
        recs = run(m, "sequential", samples).records
        steps[tk] = [r.steps for r in recs]
        assert steps[tk] == [len(m.tokenizer.encode(page_to_flat(s.page))) for s in samples], tk
    plain = [i for i, s in enumerate(samples) if "<table>" not in page_to_flat(s.page)]
    assert plain and all(steps["bpe"][i] < steps["char"][i] for i in plain)


def test_a_real_page_beyond_ascii_round_trips(models):
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    demo = list(open_dataset({"name": "omnidocbench", "root": str(DEMO)}))
    page = min((s for s in demo if not page_to_flat(s.page).isascii()), key=lambda s: len(page_to_flat(s.page)))
    for name in ("sequential", "padoc"):
        rec = run(models["bpe"], name, [page]).records[0]
        assert not rec.flags and rec.text == page_to_flat(page.page), name


def test_a_missing_tokenizer_is_one_line(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        ForcedModel("1m", tokenizer=str(tmp_path / "absent.tiktoken"))
    r = treedec_here("run", "model=forced", "model.size=1m", "data=synth", "data.pages=1",
                     f"model.tokenizer={tmp_path / 'absent.tiktoken'}", f"out={tmp_path / 'o'}")
    assert r.returncode != 0 and "no such file" in r.stderr and "Traceback" not in r.stderr
