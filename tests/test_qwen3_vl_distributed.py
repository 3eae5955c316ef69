"""`python -m treedec train model=qwen3_vl` under torchrun: two CPU processes (gloo), DDP and
FSDP (`fully_shard`), take the same AdamW step as one process on the same four pages (the
one-process run with micro-batches of at most 150 tokens, so its step is split in four
sequence-length buckets), and the checkpoint each writes is the same to float rounding."""
import json
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from cli_helpers import treedec_here
from conftest import ROOT
from test_qwen3_vl import save_tiny_qwen3_vl

ARGS = ["model=qwen3_vl", "strategy=padoc", "train.steps=1", "train.pages_per_step=4", "train.crops_per_page=0",
        "train.threads=1", "train.warmup=1", "train.lr=1e-3", "+model.finetune.page={width:128,height:96,margin:1}"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# `python -m treedec` that writes, as the interpreter starts shutting down, the OS threads of
# its rank: gloo's must be gone by then, or one can abort the rank after training
THREADS_AT_EXIT = """import atexit, json, os, runpy, sys
sys.path.insert(0, {tests!r})
from distributed_helpers import os_threads
atexit.register(lambda: json.dump(os_threads(), open({out!r} + f"/threads_{{os.environ['RANK']}}.json", "w")))
sys.argv = ["treedec", *sys.argv[1:]]
runpy.run_module("treedec", run_name="__main__", alter_sys=True)
"""


def train(prefix, ckpt, out, *extra, entry=("-m", "treedec")):
    r = subprocess.run([*prefix, *entry, "train", *ARGS, f"model.path={ckpt}", f"out={out}", *extra],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return load_file(out / "model" / "model.safetensors")


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    d = tmp_path_factory.mktemp("dist")
    ckpt = save_tiny_qwen3_vl(d / "ckpt")
    before = load_file(ckpt / "model.safetensors")
    r = treedec_here("train", *ARGS, f"model.path={ckpt}", f"out={d / 'one'}", "model.finetune.bucket_tokens=150")
    assert r.returncode == 0, r.stderr[-3000:]  # (in this process: only the two ranks need processes of their own)
    after = load_file(d / "one" / "model" / "model.safetensors")
    assert max((after[k] - before[k]).abs().max() for k in before) > 5e-4  # the step moved the weights
    return ckpt, after


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_processes_take_the_one_process_step(one_process, parallel, tmp_path):
    ckpt, want = one_process
    script = tmp_path / "treedec_threads.py"
    script.write_text(THREADS_AT_EXIT.format(tests=str(ROOT / "tests"), out=str(tmp_path)))
    got = train(TORCHRUN, ckpt, tmp_path / parallel, f"model.finetune.parallel={parallel}",
                "model.finetune.bucket_tokens=150", entry=(str(script),))
    assert got.keys() == want.keys()
    assert max((got[k] - want[k]).abs().max() for k in want) < 2e-5  # the update itself is ~1e-3 per weight
    left = [json.loads((tmp_path / f"threads_{rank}.json").read_text()) for rank in (0, 1)]
    assert all(left), left  # each rank wrote its threads (its main one at least)
    if parallel == "ddp":  # (under FSDP torch keeps the group past the teardown: VLTrainer.close)
        assert not [n for names in left for n in names if "gloo" in n], left
