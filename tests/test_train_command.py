"""`python -m treedec train` end to end at toy size: the model folder it writes loads, carries
the page distribution it was trained on, and `run` then defaults to those pages."""
import json

from cli_helpers import treedec_here

SPEC = ["model.spec.image_size=128", "model.spec.patch_size=16", "model.spec.text_layers=1", "model.spec.vision_layers=1",
        "model.spec.vision_hidden=48", "model.spec.text_hidden=64", "model.spec.head_dim=32"]
STAGE = "+train.stages=[{page: {cell: [16, 16], margin: 1, regions: [1, 1], para_words: [1, 2], wrap: hard, " \
        "furniture_prob: 0.0, kinds: {text_block: 1.0}}}]"


def test_train_writes_a_model_that_run_uses_with_its_pages(tmp_path):
    r = treedec_here("train", *SPEC, "train.steps=3", "train.pages_per_step=2", "train.threads=1", "train.warmup=1",
                     "train.grounding.vision_warmup=0", STAGE, f"out={tmp_path / 'train'}")
    assert r.returncode == 0, r.stderr[-3000:]
    model = tmp_path / "train" / "model"
    assert (tmp_path / "train" / "loss.png").stat().st_size > 0
    pages = json.loads((model / "treedec.json").read_text())["pages"]
    assert (pages["width"], pages["cell"], pages["wrap"]) == (128, [16, 16], "hard")
    r = treedec_here("run", f"model.path={model}", "data.pages=1", "runtime.max_new_tokens=4", "runtime.threads=1",
                     f"out={tmp_path / 'run'}")
    assert r.returncode == 0, r.stderr[-3000:]
    from treedec.data import open_dataset
    from treedec.data.synth import SynthConfig
    from treedec.models.vlm import VLM

    ds = open_dataset({"name": "synth", "pages": 1, "page": {}}, model_pages=VLM.load(model).pages)
    assert ds.config == SynthConfig(**pages) and ds.config.width == 128  # what run uses with this model


def test_train_average_ships_the_mean_of_the_last_checkpoints(tmp_path):
    import torch
    from safetensors.torch import load_file

    r = treedec_here("train", *SPEC, "train.steps=4", "train.ckpt_every=2", "train.average=2",
                     "train.pages_per_step=2", "train.threads=1", "train.warmup=1", "train.grounding.vision_warmup=0",
                     STAGE, f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    ck = tmp_path / "checkpoints"
    s2, s4 = load_file(ck / "step-2" / "model.safetensors"), load_file(ck / "step-4" / "model.safetensors")
    avg = load_file(tmp_path / "model" / "model.safetensors")
    last = load_file(tmp_path / "model_last" / "model.safetensors")
    for k in avg:
        torch.testing.assert_close(last[k], s4[k])
        torch.testing.assert_close(avg[k], ((s2[k].double() + s4[k].double()) / 2).to(avg[k].dtype))
