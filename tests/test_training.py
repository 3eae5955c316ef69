"""Training invariants on a tiny random VLM: resume equals an uninterrupted run; two
DDP processes (gloo) equal one process on the same data; tree vs dense attention agree."""
import json
import os
import subprocess
import sys

import pytest
import torch

from treedec.errors import UserError
from treedec.models.vlm import VLM, VLMSpec
from treedec.training.trainer import TrainConfig, Trainer

SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)
PAGE = {"width": 128, "height": 128, "cell": [8, 8], "margin": 1, "regions": [1, 2], "para_words": [1, 4],
        "furniture_prob": 0.0}


def _cfg(**kw):
    base = dict(steps=4, pages_per_step=2, warmup=2, bf16=False, ckpt_every=1000, stages=[{"page": PAGE}])
    return TrainConfig(**{**base, **kw})


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_resume_equals_uninterrupted(tmp_path):
    a = Trainer(VLM.tiny(SPEC, seed=1), _cfg(), tmp_path / "a")
    a.fit(progress=False)
    b = Trainer(VLM.tiny(SPEC, seed=1), _cfg(), tmp_path / "b")
    for _ in range(2):
        b.history.append(b.train_step())
    b.save()  # "killed" after step 2
    c = Trainer(VLM.tiny(SPEC, seed=99), _cfg(), tmp_path / "b")
    assert c.resume() and c.step == 2
    c.fit(progress=False)
    assert torch.equal(_params(a.vlm.model), _params(c.vlm.model))
    assert [h["loss"] for h in a.history] == [h["loss"] for h in c.history]


def test_tree_and_dense_attention_train_alike(tmp_path):
    a = Trainer(VLM.tiny(SPEC, seed=2), _cfg(steps=2, attention="tree"), tmp_path / "a")
    b = Trainer(VLM.tiny(SPEC, seed=2), _cfg(steps=2, attention="dense"), tmp_path / "b")
    ra, rb = a.fit(progress=False), b.fit(progress=False)
    for x, y in zip(ra, rb):
        assert abs(x["loss"] - y["loss"]) < 1e-4
    assert torch.allclose(_params(a.vlm.model), _params(b.vlm.model), atol=1e-5)


DDP_SCRIPT = r"""
import json, sys, torch
sys.path.insert(0, {tests!r})
from distributed_helpers import os_threads
from test_training import SPEC, _cfg, _params
from treedec.models.vlm import VLM
from treedec.training.trainer import Trainer
torch.set_num_threads(1)
from torch.distributed import distributed_c10d
for i, (name, kw) in enumerate({kws!r}.items()):  # one torchrun for both: each config's group made, used, ended
    distributed_c10d._world.group_count = i  # (a name of its own: the agent's store holds group 0's rank addresses)
    out = {out!r} + "/" + name
    t = Trainer(VLM.tiny(SPEC, seed=3), _cfg(**kw), out)
    t.fit(progress=False)
    if t.rank == 0:
        heads = _params(t.heads) if t.heads is not None else torch.zeros(0)
        torch.save([_params(t.vlm.model), heads], out + "/params.pt")
        json.dump([h["loss"] for h in t.history], open(out + "/loss.json", "w"))
    t.close()
    left = os_threads()  # gloo's must be joined before the interpreter shuts down
    assert not [n for n in left if "gloo" in n], (name, left)
"""
GROUNDED_PAGE = {**PAGE, "cell": [16, 16], "wrap": "hard"}  # one glyph per patch, as grounding needs


def test_ddp_two_processes_equal_one(tmp_path):
    """Two gloo ranks (two pages each) end with the weights and losses of one process over the
    same four pages, plain and with grounding on (its heads, outside DDP, too); both in one
    torchrun, a process group each. Each rank ends each with no gloo thread left: one alive while
    the interpreter shuts down can abort the rank after training."""
    plain = dict(steps=2, pages_per_step=4)
    kws = {"plain": plain, "grounding": {**plain, "stages": [{"page": GROUNDED_PAGE}],
                                         "grounding": {"enabled": True, "vision_warmup": 0}}}
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(tests=os.path.dirname(__file__), out=str(tmp_path / "two"), kws=kws))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                        str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for name, kw in kws.items():
        one = Trainer(VLM.tiny(SPEC, seed=3), _cfg(**kw), tmp_path / "one" / name)
        one.fit(progress=False)
        two, two_heads = torch.load(tmp_path / "two" / name / "params.pt")
        assert torch.allclose(_params(one.vlm.model), two, atol=1e-5), (name, (_params(one.vlm.model) - two).abs().max())
        if name == "grounding":
            heads = _params(one.heads)
            assert torch.allclose(heads, two_heads, atol=1e-5), (heads - two_heads).abs().max()
        losses = json.load(open(tmp_path / "two" / name / "loss.json"))
        assert losses == pytest.approx([h["loss"] for h in one.history], abs=1e-5), name


def test_grounding_targets_point_at_the_predicted_glyph(tmp_path):
    spec = VLMSpec(image_size=128, patch_size=16, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64,
                   text_layers=2, head_dim=32)
    page = {"width": 128, "height": 128, "cell": [16, 16], "margin": 1, "regions": [1, 3], "furniture_prob": 0.3,
            "wrap": "hard", "text_mode": "random"}
    cfg = _cfg(steps=3, pages_per_step=3, stages=[{"page": page}], grounding={"enabled": True, "vision_warmup": 1})
    t = Trainer(VLM.tiny(spec, seed=4), cfg, tmp_path)
    for step in range(2):  # one step per form: flat, then tree
        packed, px, n, targets = t.batch(step)
        assert targets.rows, "no grounded characters"
        grid = t.grid
        starts = [s.start for s in packed.tree.segments]
        for row, key, char in zip(targets.rows, targets.keys, targets.chars):
            assert int(packed.labels[row]) == char  # the row predicts this character ...
            assert int(packed.ids[key]) == t.vlm.tokenizer.image_id  # ... whose cell is an image token ...
            image = sum(1 for s in starts if s <= key) - 1  # (segment index of the page's root)
            first = packed.ids[starts[image]:].tolist().index(t.vlm.tokenizer.image_id) + starts[image]
            example = [i for i, s in enumerate(_roots(packed)) if s == starts[image]][0]
            assert int(targets.glyph[example][key - first]) == char  # ... which holds that glyph
    assert "steer_p" not in t.train_step()  # vision warm-up: glyph and predecessor losses only
    assert t.train_step()["steer_p"] > 0  # then steering and readout run


def _roots(packed):
    return [s.start for s in packed.tree.segments if not s.prefix]


RELOAD = r"""
import sys, torch
sys.path.insert(0, {tests!r})
from treedec.models.vlm import VLM
from treedec.data.synth import SynthConfig, generate_page
vlm = VLM.load({ckpt!r})
s = generate_page(7, SynthConfig(width=128, height=128, cell=(8, 8), margin=1))
p = vlm.prompt(s.image, "tree")
with torch.no_grad():
    torch.save(vlm.model(input_ids=torch.tensor([p.ids]), **p.inputs).logits, {out!r})
"""


def test_trained_checkpoint_reloads_identically_in_a_fresh_process(tmp_path):
    t = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=2, bf16=True), tmp_path / "run")
    t.fit(progress=False)
    t.vlm.save(tmp_path / "ckpt")
    script = tmp_path / "reload.py"
    script.write_text(RELOAD.format(tests=os.path.dirname(__file__), ckpt=str(tmp_path / "ckpt"),
                                    out=str(tmp_path / "logits.pt")))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    from treedec.data.synth import SynthConfig, generate_page

    s = generate_page(7, SynthConfig(width=128, height=128, cell=(8, 8), margin=1))
    p = t.vlm.prompt(s.image, "tree")
    t.vlm.model.eval()
    with torch.no_grad():
        here = t.vlm.model(input_ids=torch.tensor([p.ids]), **p.inputs).logits
    assert torch.equal(here, torch.load(tmp_path / "logits.pt"))


def test_crop_jitter_moves_boxes_within_bounds_and_keeps_targets():
    import random

    from treedec.data.synth import SynthConfig, generate_page
    from treedec.models.vlm import VLM, VLMSpec
    from treedec.training.examples import crop_examples, jitter_box

    rng = random.Random(0)
    box = (40.0, 20.0, 200.0, 36.0)  # 16 high
    for _ in range(200):
        x1, y1, x2, y2 = jitter_box(box, rng, 0.5)
        assert x1 < x2 and y1 < y2
        assert all(abs(a - b) <= 8.0 + 1e-9 for a, b in zip((x1, y1, x2, y2), box))
        assert all(abs(a - b) <= 2.0 + 1e-9 for a, b in zip(jitter_box(box, rng, 0.25, unit=8), box))
    vlm = VLM.tiny(VLMSpec(image_size=128, patch_size=8, vision_hidden=64, vision_layers=1, vision_heads=1,
                           text_hidden=64, text_layers=1, head_dim=32), seed=0)
    sample = generate_page(3, SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3)))
    plain = crop_examples(sample, vlm, random.Random(1), 3)
    moved = crop_examples(sample, vlm, random.Random(1), 3, jitter=0.5)
    assert [e.graph[0].tokens for e in plain] == [e.graph[0].tokens for e in moved]  # same regions, same targets
    assert [e.image.size for e in plain] != [e.image.size for e in moved]
    assert vlm.page_grid(sample.image) == 8 and vlm.page_grid(sample.image.resize((256, 128))) is None  # shrunk: no grid
    # on the model's grid: a jittered crop gains whole cells of context, never a fraction
    assert all((a - b) % 8 == 0 for p, m in zip(plain, moved) for a, b in zip(m.image.size, p.image.size))


def test_crops_cut_on_the_patch_grid_keep_the_pages_pixels_per_patch():
    """HSD stage 1 cuts a drafter's box as the crop task's boxes were cut: moved to the
    nearest grid lines, then padded; a box at the page edge is padded with white, so its
    glyphs sit at the same offset as anywhere else."""
    import numpy as np
    from PIL import Image

    from treedec.training.examples import crop_image, snap_box

    rng = np.random.default_rng(0)
    page = Image.fromarray(rng.integers(0, 255, (96, 96, 3), dtype=np.uint8))
    cell_box = (16.0, 32.0, 64.0, 48.0)
    tight = (19.5, 34.0, 61.0, 45.5)  # on the ink of those cells
    loose = (12.0, 29.0, 67.0, 51.0)  # a few pixels outside them
    assert snap_box(tight, 16) == snap_box(loose, 16) == cell_box
    assert snap_box((20.0, 36.0, 23.0, 38.0), 16) == (16, 32, 32, 48)  # never empty
    want = np.asarray(crop_image(page, cell_box))
    assert want.shape == (16 + 4, 48 + 4, 3)  # the box + 2 px per side, as trained
    assert np.array_equal(np.asarray(crop_image(page, snap_box(tight, 16), grid=16)), want)
    assert np.array_equal(np.asarray(crop_image(page, cell_box, grid=16)), want)  # aligned: unchanged
    edge = np.asarray(crop_image(page, (0.0, 0.0, 32.0, 16.0), grid=16))
    assert edge.shape == (20, 36, 3)
    assert (edge[:2] == 255).all() and (edge[:, :2] == 255).all()  # white beyond the page
    assert np.array_equal(edge[2:, 2:], np.asarray(page)[:18, :34])


def test_misread_regions_are_input_only_and_the_rest_of_the_page_keeps_its_labels(tmp_path):
    """Flat-form exposure-bias training: a misread region's content is replaced and takes no
    loss; everything else (the next block's layout above all) is the page's own target."""
    import random

    from treedec.data.synth import SynthConfig, generate_page
    from treedec.formats.contract import parse_flat
    from treedec.strategies.base import STRATEGIES
    from treedec.training.examples import misread, page_example
    from treedec.training.packing import IGNORE, pack

    vlm = VLM.tiny(SPEC, seed=0)
    tok = vlm.tokenizer
    seq, padoc = STRATEGIES.get("sequential")(tok), STRATEGIES.get("padoc")(tok)
    cfg = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(3, 4),
                      kinds={"text_block": 0.5, "equation_isolated": 0.5})
    sample = next(s for s in (generate_page(k, cfg) for k in range(50))
                  if any(b.category == "equation_isolated" for b in s.page.blocks[:-1])
                  and any(b.category == "text_block" for b in s.page.blocks))
    plain = page_example(sample, vlm, seq)
    wrong = misread(plain, tok, random.Random(0), 1.0, ["equation_isolated"])
    assert misread(plain, tok, random.Random(0), 0.0, ["equation_isolated"]) is plain
    assert misread(page_example(sample, vlm, padoc), tok, random.Random(0), 1.0, ["equation_isolated"]).no_loss == set()
    n_prompt = plain.graph[0].prompt_len
    truth = parse_flat(tok.decode(plain.graph[0].tokens[n_prompt:])).page.blocks
    read = parse_flat(tok.decode(wrong.graph[0].tokens[n_prompt:])).page.blocks
    assert [(b.category, b.bbox) for b in read] == [(b.category, b.bbox) for b in truth]  # same layout
    for a, b in zip(truth, read):  # equations misread, everything else as it was
        assert (a.content != b.content) == (a.category == "equation_isolated")
    toks = wrong.graph[0].tokens
    no_loss = sorted(i for _, i in wrong.no_loss)
    assert no_loss and all(toks[i] not in (tok.block_id, tok.child_id, tok.eos_id) for i in no_loss)
    for i in no_loss:  # exactly the misread contents: each span sits between <CHILD> and <BLOCK>/<eos>
        assert (0, i - 1) in wrong.no_loss or toks[i - 1] == tok.child_id
        assert (0, i + 1) in wrong.no_loss or toks[i + 1] in (tok.block_id, tok.eos_id)
    packed = pack([wrong.graph], [wrong.no_loss])
    labels = packed.labels.tolist()
    for i in range(n_prompt, len(toks)):  # label i-1 predicts token i
        assert (labels[i - 1] == IGNORE) == (i in no_loss)
        if i not in no_loss:
            assert labels[i - 1] == toks[i]
    # the trainer: flat examples lose their equations' labels, tree examples keep all of theirs
    stages = [{"page": {**PAGE, "regions": [3, 4], "kinds": {"equation_isolated": 1.0}}}]
    base = Trainer(VLM.tiny(SPEC, seed=0), _cfg(stages=stages, crops_per_page=0), tmp_path / "a")
    mis = Trainer(VLM.tiny(SPEC, seed=0), _cfg(stages=stages, crops_per_page=0, misread=1.0), tmp_path / "b")
    (pa, *_), (pb, *_) = base.batch(0), mis.batch(0)  # example 0 is sequential, example 1 padoc
    seg_a, seg_b = pa.tree.segments, pb.tree.segments
    flat_a, flat_b = pa.labels[:seg_a[0].length], pb.labels[:seg_b[0].length]
    assert int((flat_b != IGNORE).sum()) < int((flat_a != IGNORE).sum())
    assert torch.equal(pa.labels[seg_a[1].start:], pb.labels[seg_b[1].start:])
    with pytest.raises(UserError):
        _cfg(misread=1.5)
    with pytest.raises(UserError):
        _cfg(misread_categories=["nope"])


def test_device_setting_is_checked():
    with pytest.raises(UserError, match="train.device"):
        _cfg(device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA device"):
            _cfg(device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_matches_cpu(tmp_path):
    """The same steps on a GPU and on the CPU (fp32, tree-varlen attention, grounding off)."""
    a = Trainer(VLM.tiny(SPEC, seed=1), _cfg(steps=2, device="cpu"), tmp_path / "cpu")
    b = Trainer(VLM.tiny(SPEC, seed=1), _cfg(steps=2, device="cuda"), tmp_path / "cuda")
    ha, hb = a.fit(progress=False), b.fit(progress=False)
    assert abs(ha[-1]["loss"] - hb[-1]["loss"]) < 1e-3
    assert torch.allclose(_params(a.model), _params(b.model).cpu(), atol=1e-4)


def test_checkpoint_pages_reads_what_the_model_was_trained_on(tmp_path):
    from treedec.models.vlm import checkpoint_pages

    t = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=1), tmp_path / "run")
    t.fit(progress=False)
    t.vlm.save(tmp_path / "ckpt")
    pages = checkpoint_pages(tmp_path / "ckpt")
    assert pages == VLM.load(tmp_path / "ckpt").pages
    assert pages["width"] == 128 and pages["cell"] == [8, 8] and pages["furniture_prob"] == 0.0
    untrained = VLM.tiny(SPEC, seed=6)
    untrained.save(tmp_path / "fresh")  # trained on nothing: a page of its image size
    assert checkpoint_pages(tmp_path / "fresh") == {"width": 128, "height": 128}
    assert checkpoint_pages(tmp_path) is None  # no treedec.json
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "treedec.json").write_text("{not json")
    with pytest.raises(UserError, match="cannot read"):
        checkpoint_pages(tmp_path / "bad")


def test_prefetched_batches_train_as_in_process(tmp_path):
    """train.loader_workers=2 (batches made ahead in forked workers) ends with the very weights of
    batches made in-process."""
    a = Trainer(VLM.tiny(SPEC, seed=5), _cfg(steps=3), tmp_path / "a")
    b = Trainer(VLM.tiny(SPEC, seed=5), _cfg(steps=3, loader_workers=2), tmp_path / "b")
    ra, rb = a.fit(progress=False), b.fit(progress=False)
    assert torch.equal(_params(a.vlm.model), _params(b.vlm.model))
    assert [r["loss"] for r in ra] == [r["loss"] for r in rb]


def test_loader_workers_and_time_limit_must_not_be_negative():
    with pytest.raises(UserError, match="loader_workers"):
        _cfg(loader_workers=-1)
    with pytest.raises(UserError, match="time_limit_s"):
        _cfg(time_limit_s=-1)
    with pytest.raises(UserError, match="stop_after"):
        _cfg(stop_after=-1)


def test_time_limit_stops_with_a_checkpoint_that_resumes(tmp_path):
    """train.time_limit_s ends `fit` after the step that reaches it, with a checkpoint; going on
    from it gives the weights of an uninterrupted run."""
    a = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=3), tmp_path / "a")
    a.fit(progress=False)
    b = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=3, time_limit_s=1e-9), tmp_path / "b")
    b.fit(progress=False)
    assert b.stopped_early and b.step == 1 and (b.ckpt_dir / "trainer_state.pt").is_file()
    c = Trainer(VLM.tiny(SPEC, seed=99), _cfg(steps=3), tmp_path / "b")
    assert c.resume() and c.step == 1
    c.fit(progress=False)
    assert not c.stopped_early and torch.equal(_params(a.vlm.model), _params(c.vlm.model))
    d = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=3, ckpt_every=1, time_limit_s=1e-9), tmp_path / "d")
    d.fit(progress=False)  # a checkpoint step stops too
    assert d.stopped_early and d.step == 1


def test_stop_after_keeps_the_schedule_and_resumes(tmp_path):
    """train.stop_after=2 of steps=4 ends after step 2 with a checkpoint, at the learning rates of
    the 4-step schedule; going on gives the weights of the uninterrupted run."""
    a = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=4), tmp_path / "a")
    ra = a.fit(progress=False)
    b = Trainer(VLM.tiny(SPEC, seed=6), _cfg(steps=4, stop_after=2), tmp_path / "b")
    rb = b.fit(progress=False)
    assert b.stopped_early and b.step == 2 and [r["lr"] for r in rb] == [r["lr"] for r in ra[:2]]
    c = Trainer(VLM.tiny(SPEC, seed=99), _cfg(steps=4, stop_after=2), tmp_path / "b")
    assert c.resume() and c.step == 2
    c.fit(progress=False)  # resumed at stop_after: goes on to the end
    assert c.step == 4 and not c.stopped_early
    assert torch.equal(_params(a.vlm.model), _params(c.vlm.model))
