"""Training invariants on a tiny random VLM: resume equals an uninterrupted run; two
DDP processes (gloo) equal one process on the same data; tree vs dense attention agree."""
import json
import os
import subprocess
import sys

import pytest
import torch

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
from test_training import SPEC, _cfg, _params
from treedec.models.vlm import VLM
from treedec.training.trainer import Trainer
torch.set_num_threads(1)
t = Trainer(VLM.tiny(SPEC, seed=3), _cfg(steps=2, pages_per_step=4), {out!r})
t.fit(progress=False)
if t.rank == 0:
    torch.save(_params(t.vlm.model), {out!r} + "/params.pt")
    json.dump([h["loss"] for h in t.history], open({out!r} + "/loss.json", "w"))
"""


def test_ddp_two_processes_equal_one(tmp_path):
    one = Trainer(VLM.tiny(SPEC, seed=3), _cfg(steps=2, pages_per_step=4), tmp_path / "one")
    one.fit(progress=False)
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(tests=os.path.dirname(__file__), out=str(tmp_path)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29533",
                        str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    two = torch.load(tmp_path / "params.pt")
    assert torch.allclose(_params(one.vlm.model), two, atol=1e-5), (_params(one.vlm.model) - two).abs().max()
    losses = json.load(open(tmp_path / "loss.json"))
    assert losses == pytest.approx([h["loss"] for h in one.history], abs=1e-5)
