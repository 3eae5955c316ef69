"""Tree-varlen fine-tuning of Qwen3-VL on a tiny random checkpoint (tests/test_qwen3_vl.py
builds it from transformers' own classes): the packed positions are those of per-branch
decoding, the packed loss and gradients equal the dense-mask reference, and a model trained
on two synthetic pages decodes them exactly (ground truth) by tree decoding and by
per-branch decoding."""
import pytest
import torch

from treedec.data.synth import SynthConfig
from treedec.models.qwen3_vl import mrope_positions
from treedec.models.loader import load_model
from treedec.strategies.base import STRATEGIES
from treedec.training.qwen3_vl_examples import page_example, synthetic_pages
from treedec.training.qwen3_vl_packing import PackedLM, pack_pages
from treedec.training.qwen3_vl_trainer import FinetuneConfig, VLTrainer, buckets
from treedec.training.trainer import TrainConfig

from test_qwen3_vl import hf_greedy, run, save_tiny_qwen3_vl

PAGE = dict(width=128, height=96, margin=1, regions=(2, 3), furniture_prob=0, para_words=(2, 6))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl"))


def examples(vlm, strategies, seeds=(0, 2)):
    samples = synthetic_pages(seeds, SynthConfig(**PAGE))
    return [page_example(vlm, s.page, s.image, STRATEGIES.get(n)(vlm.tokenizer)) for s, n in zip(samples, strategies)]


def test_positions_are_those_of_per_branch_decoding(ckpt):
    """Every packed token's (t, h, w) equals what the model's own get_rope_index gives it in
    the sequence a per-branch decoder feeds: [prompt, layout up to the fork, branch]."""
    vlm = load_model(ckpt)
    exs = examples(vlm, ["padoc", "sequential"])
    b = pack_pages(exs)
    seg = 0
    for e in exs:
        g, grid = e.graph, e.prompt.inputs["image_grid_thw"]
        for s in g.streams:
            ctx = g.context(s.id)[:len(g.context(s.id)) - len(s.tokens)] + s.tokens
            want, _ = mrope_positions(vlm.model, ctx, grid, vlm.tokenizer.image_id)
            at = b.tree.segments[seg + s.id]
            assert torch.equal(b.position_ids[:, :, at.start:at.start + at.length], want[:, :, -len(s.tokens):-1])
        seg += len(g)
    assert [len(e.graph) for e in exs] == [3, 1]  # two branches of the padoc page, the sequential page's one stream


def test_packed_loss_and_gradients_equal_the_dense_mask(ckpt):
    vlm = load_model(ckpt)
    b = pack_pages(examples(vlm, ["padoc", "sequential"]) + examples(vlm, ["padoc"], seeds=(5,)))
    assert len(b.tree.segments) >= 6 and b.image_grid_thw.shape[0] == 3
    model = vlm.model.train()
    res = {}
    for attention in ("tree", "dense"):
        m = PackedLM(model, attention)
        model.zero_grad()
        loss, correct = m(**m.batch_inputs(b, torch.device("cpu")))
        loss.backward()
        res[attention] = loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    (l1, g1), (l2, g2) = res["tree"], res["dense"]
    assert l1 > 0 and torch.allclose(l1, l2, rtol=1e-5)
    assert g1.keys() == g2.keys() and len(g1) == len(list(model.parameters()))
    for n in g1:
        assert torch.allclose(g1[n], g2[n], rtol=1e-4, atol=1e-5), n
    # the dense reference with a plain causal mask (branches seeing each other) differs
    m = PackedLM(model, "dense")
    kw = m.batch_inputs(b, torch.device("cpu"))
    L = b.ids.numel()
    kw["attention_mask"] = torch.zeros(L, L).masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))[None, None]
    assert not torch.allclose(m(**kw)[0].detach(), l1, rtol=1e-3)


def test_buckets_group_similar_lengths_under_the_limit(ckpt):
    vlm = load_model(ckpt)
    exs = examples(vlm, ["padoc", "sequential", "padoc"], seeds=(0, 2, 3))
    n = sorted(e.tokens for e in exs)
    micro = buckets(exs, n[-1] + n[-2])
    assert [len(m) for m in micro] == [2, 1] and micro[0][0].tokens == n[-1]
    assert [len(m) for m in buckets(exs, 1)] == [1, 1, 1]


def test_trained_pages_decode_identically_by_tree_and_per_branch(ckpt):
    """80 steps on two pages memorise them (teacher-forced accuracy 1.0); the engine's tree
    decoding (strategy=padoc) then gives the ground-truth graph, and each branch equals the
    branch decoded alone by HF generate from [prompt, layout up to its fork, <CHILD>]."""
    vlm = load_model(ckpt)
    tcfg = TrainConfig(steps=80, pages_per_step=2, strategies=["padoc"], lr=3e-3, min_lr=3e-4, warmup=10,
                       device="cpu", bf16=False, crops_per_page=0)
    trainer = VLTrainer(vlm, tcfg, FinetuneConfig(pool=2, page=PAGE))
    history = trainer.fit(progress=False)
    assert history[-1]["token_acc"] == 1.0 and history[-1]["loss"] < history[0]["loss"] / 100
    vlm.model.eval()
    vlm.model.model.language_model.config._attn_implementation = "sdpa"
    branches = 0
    for s in trainer.pool:
        p = vlm.prompt(s.image, "tree")
        truth = page_example(vlm, s.page, s.image, STRATEGIES.get("padoc")(vlm.tokenizer)).graph
        _, [r] = run(vlm, "padoc", [p], max_new_tokens=120)
        g = r.graph
        assert [x.tokens for x in g.streams] == [x.tokens for x in truth.streams]
        assert g[0].tokens[len(p.ids):] == hf_greedy(vlm, p, p.ids, 120)
        for c in g.children(0):
            ctx = g.context(c)[: -len(g[c].tokens)] + g[c].tokens[:1]
            assert g[c].tokens[1:] == hf_greedy(vlm, p, ctx, 120)
            branches += 1
        assert r.steps < g.total_generated()
    assert branches >= 3


def test_gradient_checkpointing_and_buckets_keep_the_update(ckpt):
    """One step with gradient checkpointing and one-page micro-batches moves every weight as
    one step without either (the loss is a sum over tokens, normalised once per step)."""
    after = []
    for fcfg in (FinetuneConfig(page=PAGE), FinetuneConfig(page=PAGE, grad_checkpointing=True, bucket_tokens=1)):
        vlm = load_model(ckpt)
        tcfg = TrainConfig(steps=1, pages_per_step=3, strategies=["padoc", "sequential"], warmup=1, device="cpu",
                           bf16=False, crops_per_page=0)
        trainer = VLTrainer(vlm, tcfg, fcfg)
        [row] = trainer.fit(progress=False)
        assert row["micro_batches"] == (1 if not fcfg.grad_checkpointing else 3)
        assert vlm.model.model.language_model.gradient_checkpointing == fcfg.grad_checkpointing
        after.append({n: p.detach().clone() for n, p in vlm.model.named_parameters()})
    before = load_model(ckpt).model.state_dict()
    assert max((after[0][n] - before[n]).abs().max() for n in after[0]) > 5e-4
    for n in after[0]:
        assert torch.allclose(after[0][n], after[1][n], atol=2e-5), n


def test_omnidocbench_pages_become_trees_under_the_chat_template(ckpt):
    """The demo's OmniDocBench annotations + images: each page's PaDoc tree is rooted at the
    prompt the inference side builds (chat template, image, <|tree|>), has a branch per
    content region, and splices back into the flat (sequential) serialization."""
    from conftest import DEMO
    from treedec.formats.contract import page_to_tree
    from treedec.training.qwen3_vl_examples import omnidocbench_pages

    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    vlm = load_model(ckpt)
    tok = vlm.tokenizer
    samples = omnidocbench_pages(DEMO, limit=3)
    assert len(samples) == 3 and all(s.image is not None for s in samples)
    trees = [page_example(vlm, s.page, s.image, STRATEGIES.get("padoc")(tok)) for s in samples]
    for s, e in zip(samples, trees):
        flat = page_example(vlm, s.page, s.image, STRATEGIES.get("sequential")(tok)).graph
        prompt = vlm.prompt(s.image, "tree").ids
        assert e.graph[0].tokens[:len(prompt)] == prompt == e.prompt.ids
        assert tok.decode(prompt).startswith("<|im_start|>user\n<|vision_start|><|image_pad|>")
        assert len(e.graph) - 1 == len(page_to_tree(s.page).branches) > 0
        assert e.graph.flatten(drop_tail={tok.eos_id}) == flat[0].tokens[flat[0].prompt_len:]
    b = pack_pages(trees)
    assert b.image_grid_thw.shape[0] == 3 and b.supervised > 0
    m = PackedLM(vlm.model, "tree")
    assert torch.isfinite(m(**m.batch_inputs(b, torch.device("cpu")))[0])


def test_the_padoc_recipe_runs_on_the_tiny_config(ckpt, tmp_path):
    """Smoke run of experiments' recipe (+experiment=qwen3_vl_padoc: FSDP in one process, the
    paper's lr/warmup/batch/length) on the tiny checkpoint, shortened, then resumed for one more
    step; its checkpoint is read back by `run`'s loader and decodes a page with strategy=padoc."""
    import json

    from omegaconf import OmegaConf

    from cli_helpers import treedec_here
    from treedec.models.loader import load_vlm

    out = tmp_path / "out"
    r = treedec_here("train", "+experiment=qwen3_vl_padoc", f"model.path={ckpt}", "train.steps=2", "train.pages_per_step=2",
                     "train.warmup=1", "train.threads=1", "+model.finetune.page={width:128,height:96,margin:1}", f"out={out}")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["parallel"] == "fsdp" and summary["world"] == 1
    cfg = OmegaConf.load(out / "config.yaml")
    assert cfg.train.lr == 5e-6 and cfg.model.finetune.bucket_tokens == 16384 and cfg.strategy.name == "padoc"
    # the same command with more steps goes on from the checkpoint (FSDP's optimizer state too)
    r = treedec_here("train", "+experiment=qwen3_vl_padoc", f"model.path={ckpt}", "train.steps=3", "train.pages_per_step=2",
                     "train.warmup=1", "train.threads=1", "+model.finetune.page={width:128,height:96,margin:1}", f"out={out}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resumed from {out / 'model'} at step 2" in r.stdout
    assert json.loads((out / "summary.json").read_text())["steps"] == 3
    vlm = load_vlm(OmegaConf.create({"name": "qwen3_vl", "path": str(out / "model")}))
    image = synthetic_pages([0], SynthConfig(**PAGE))[0].image
    _, [res] = run(vlm, "padoc", [vlm.prompt(image, "tree")], max_new_tokens=8)
    assert res.graph[0].tokens[:len(vlm.prompt(image, "tree").ids)] == vlm.prompt(image, "tree").ids


def test_a_resumed_run_takes_the_same_steps(ckpt, tmp_path):
    """Two steps in one go == one step, a checkpoint (weights + optimizer state), a new process's
    trainer resuming from it, one more step; resuming the weights without the optimizer's
    moments gives another update (the check can fail)."""
    def trainer(path, steps):
        tcfg = TrainConfig(steps=steps, pages_per_step=2, strategies=["padoc", "sequential"], warmup=1, device="cpu",
                           bf16=False, crops_per_page=0, lr=1e-3)
        return VLTrainer(load_model(path), tcfg, FinetuneConfig(page=PAGE))

    straight = trainer(ckpt, 2)
    straight.fit(progress=False)
    want = {n: p.detach().clone() for n, p in straight.vlm.model.named_parameters()}

    first = trainer(ckpt, 1)
    first.fit(tmp_path, progress=False)
    assert (tmp_path / "model" / "trainer_state.pt").is_file() and not (tmp_path / "model.tmp").exists()
    results = {}
    for with_state in (True, False):
        t = trainer(tmp_path / "model", 2)
        assert t.resume(tmp_path / "model") if with_state else True
        if not with_state:
            t.step = 1
        t.fit(progress=False)
        results[with_state] = {n: p.detach() for n, p in t.vlm.model.named_parameters()}
        if with_state:
            assert [h["step"] for h in t.history] == [1, 2]
            assert t.history[-1]["loss"] == pytest.approx(straight.history[-1]["loss"], rel=1e-5)
    for n in want:
        assert torch.allclose(results[True][n], want[n], atol=1e-6), n
    assert max((results[False][n] - want[n]).abs().max() for n in want) > 1e-4
