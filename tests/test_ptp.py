"""PTP (Parallel-Token Prediction): placeholder rows never change a real row, decoding with
them is lossless and not vacuously so (drafted > accepted > 0) on a tiny random Idefics3 with
placeholders fitted on its own output, and it refuses in one line what cannot express it.
The shipped placeholders: tests/test_shipped_ptp.py."""
import pytest
import torch

from treedec.data.synth import generate_page
from treedec.engine.draft import DraftTree
from treedec.errors import UserError
from treedec.models.placeholders import Placeholders, PTPConfig, decoder_linears, load_placeholders
from treedec.models.vlm import VLM
from treedec.strategies.base import build_strategy

from lossless_helpers import assert_lossless, decode, fitted_placeholders
from test_every_strategy import FORCED, PAGE, SPEC, forced


@pytest.fixture(scope="module")
def vlm():
    torch.set_num_threads(1)
    return VLM.tiny(SPEC, seed=5)


@pytest.fixture(scope="module")
def fitted(vlm, tmp_path_factory):
    """Placeholders fitted on the model's forced output (flat and forked) on pages 2, 3."""
    other = [generate_page(s, PAGE) for s in (2, 3)]
    runs = {}
    for base in ("sequential", "padoc"):
        out = decode(vlm, build_strategy({"name": base}, vlm.tokenizer), other, FORCED, forced(vlm, base, other))
        runs.update({f"{base}/{n}": r for n, r in out.items()})
    pages = [generate_page(s, PAGE) for s in (2, 3)] * 2
    for p, name in zip(pages, runs):
        p.name = name
    return fitted_placeholders(vlm, runs, pages, tmp_path_factory.mktemp("ptp"), steps=200)


def test_placeholder_rows_change_no_real_row(vlm):
    """One step over real tokens with three more rows hung after them: ordinary tokens, then
    placeholders (adapted, nonzero). The real rows' logits are bit for bit the same (and close
    to those of the step without the extra rows: matmul shapes differ there)."""
    from treedec.engine.kv import KVArena

    text = vlm.model.config.text_config
    ph = Placeholders(PTPConfig(text.hidden_size, text.vocab_size, 3), decoder_linears(vlm.model))
    for u in ph.up:
        torch.nn.init.normal_(u, std=0.5)
    prompt = vlm.prompt(generate_page(0, PAGE).image, "flat")
    adapter = vlm.adapter()
    real = torch.tensor([5, 6, 7])
    outs = []
    for extra in ([], [9, 10, 11], [text.vocab_size + j for j in range(3)]):
        _, kv = adapter.prefill(prompt)
        arena = KVArena()
        arena.add_prefill(kv, 0)
        n, q = len(prompt.ids), 3 + len(extra)
        ids = torch.tensor(real.tolist() + extra)
        pos = torch.arange(n, n + q)
        tree = DraftTree([0, 0, 0] + extra, [-1, 0, 1] + ([1, 3, 4] if extra else []))
        vis = torch.ones(q, n + q, dtype=torch.bool)
        vis[:, n:] = tree.ancestor_mask()
        pos[3:] = n + torch.tensor(tree.depths()[3:])
        mask = torch.zeros(vis.shape).masked_fill(~vis, float("-inf"))
        outs.append(adapter.step(ids, pos, mask, arena.cache, placeholders=ph))
    assert torch.equal(outs[1][:3], outs[2][:3])
    torch.testing.assert_close(outs[0], outs[2][:3])
    assert not torch.allclose(outs[1][3:], outs[2][3:], atol=1e-2)  # the placeholders computed their own


@pytest.mark.parametrize("base", ["sequential", "padoc"])
def test_ptp_is_lossless_on_a_random_model(vlm, fitted, base):
    samples = [generate_page(s, PAGE) for s in range(2)]
    procs = forced(vlm, base, samples)
    plain = decode(vlm, build_strategy({"name": base}, vlm.tokenizer), samples, FORCED, procs)
    strategy = build_strategy({"name": "ptp", "base": base, "k": 3, "placeholders": fitted}, vlm.tokenizer)
    strategy = strategy.for_run(vlm)
    spec = decode(vlm, strategy, samples, FORCED, procs)
    assert_lossless(plain, spec)
    assert sum(r.steps for r in spec.values()) < sum(r.steps for r in plain.values())


def test_ptp_refuses_what_cannot_express_it(vlm, fitted, tmp_path):
    from treedec.models.loader import load_vlm
    from omegaconf import OmegaConf
    from treedec.runtimes.vllm.runtime import VLLMRuntime
    from test_qwen3_vl import save_tiny_qwen3_vl

    other = VLM.tiny(SPEC, seed=6)
    with pytest.raises(UserError, match="trained on base weights") as e:
        load_placeholders(fitted, other.model)
    qwen = load_vlm(OmegaConf.create({"name": "qwen3_vl", "path": str(save_tiny_qwen3_vl(tmp_path))}))
    strategy = build_strategy({"name": "ptp", "placeholders": fitted}, qwen.tokenizer)
    with pytest.raises(UserError, match="Idefics3") as q:
        strategy.for_run(qwen)
    with pytest.raises(UserError, match="runtime=embedded") as v:
        VLLMRuntime().check(vlm, strategy)
    assert all("\n" not in str(x.value) for x in (e, q, v))


def test_training_resumes_from_its_checkpoint(vlm, tmp_path):
    """A six-step run stopped after four (its checkpoint written), then resumed, equals six in
    one go: the same losses and the same placeholders."""
    from treedec.training.ptp import graph_kv, train

    samples = [generate_page(2, PAGE)]
    runs = decode(vlm, build_strategy({"name": "sequential"}, vlm.tokenizer), samples, FORCED,
                  forced(vlm, "sequential", samples))
    pages = [graph_kv(vlm, runs[samples[0].name].graph, samples[0].image)]
    text = vlm.model.config.text_config
    made = []
    for stops in ([None], [4, None]):
        torch.manual_seed(0)
        ph = Placeholders(PTPConfig(text.hidden_size, text.vocab_size, 3), decoder_linears(vlm.model))
        ckpt = tmp_path / f"ckpt{len(stops)}.pt"
        for stop in stops:
            history = train(vlm, pages, ph, 6, 1e-2, 8, 0, ckpt, progress=False, stop=stop)
        made.append((history, ph.state_dict()))
    assert [h["loss"] for h in made[0][0]] == [h["loss"] for h in made[1][0]] and len(made[0][0]) == 6
    assert all(torch.equal(made[0][1][k], made[1][1][k]) for k in made[0][1])
