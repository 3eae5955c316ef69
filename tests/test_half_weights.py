"""Shipped weights are stored in half precision (scripts/half_weights.py) and computed in
float32: storing changes only the rounding, loading upcasts, and an MTP head trained on the
float32 weights still names the fp16-stored copy as its base (`base_hash` rounds to fp16)."""
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import load_script
from treedec.errors import UserError
from treedec.models.mtp_head import MTPConfig, MTPHead, load_head, save_head
from treedec.models.tied_weights import base_hash
from treedec.models.vlm import VLM, VLMSpec

half = load_script("scripts/half_weights.py")
check = load_script("scripts/check_repo_weight.py")

SPEC = VLMSpec(image_size=64, vision_hidden=32, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


def test_half_stored_weights_load_as_float32_and_keep_the_heads_base(tmp_path):
    vlm = VLM.tiny(SPEC, seed=3)
    d = vlm.save(tmp_path / "m")
    weights = str(d / "model.safetensors")
    assert check.stored_dtypes(Path(weights)) == {"F32"}
    changed, total = half.halve(weights)
    assert 0 < changed == total  # every tensor of this model is floating point
    assert check.stored_dtypes(Path(weights)) == {"F16"}
    assert half.halve(weights) == (0, total)  # already half: left as it is
    loaded = VLM.load(d)
    assert {p.dtype for p in loaded.model.parameters()} == {torch.float32}
    stored = load_file(weights)
    for name, t in vlm.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], stored[name].float())  # upcast, nothing else
        assert torch.equal(stored[name], t.half())  # fp16 rounding of the original
    assert base_hash(loaded.model) == base_hash(vlm.model)
    head = MTPHead(MTPConfig(hidden=64, intermediate=32, k=2))
    save_head(head, tmp_path / "head", base_hash(vlm.model))
    load_head(tmp_path / "head", loaded.model)  # the fp32-trained head accepts its fp16-stored base
    with pytest.raises(UserError, match="trained on base weights"):
        load_head(tmp_path / "head", VLM.tiny(SPEC, seed=4).model)  # but not other weights

