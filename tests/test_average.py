"""Checkpoint averaging: the mean of the weights, the rest of the folder from the last one;
clear errors for folders that are not checkpoints of one model."""
import pytest
import torch
from safetensors.torch import load_file

from treedec.errors import UserError
from treedec.models.vlm import VLM, VLMSpec
from treedec.training.average import average_checkpoints

SPEC = VLMSpec(image_size=64, vision_hidden=32, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


def test_average_is_the_elementwise_mean(tmp_path):
    a, b = VLM.tiny(SPEC, seed=1), VLM.tiny(SPEC, seed=2)
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    out = average_checkpoints([tmp_path / "a", tmp_path / "b"], tmp_path / "avg")
    avg, wa, wb = (load_file(p / "model.safetensors") for p in (out, tmp_path / "a", tmp_path / "b"))
    assert avg.keys() == wa.keys()
    for k in avg:
        assert avg[k].dtype == wa[k].dtype
        torch.testing.assert_close(avg[k], ((wa[k].double() + wb[k].double()) / 2).to(wa[k].dtype))
    assert any(not torch.equal(avg[k], wa[k]) for k in avg)  # the seeds differ: so do the weights
    loaded = VLM.load(out)  # a checkpoint like any other
    assert loaded.spec == SPEC


def test_averaging_other_models_or_nothing_is_a_user_error(tmp_path):
    VLM.tiny(SPEC, seed=1).save(tmp_path / "a")
    VLM.tiny(VLMSpec(image_size=64, vision_hidden=32, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=2,
                     head_dim=32)).save(tmp_path / "deeper")
    with pytest.raises(UserError, match="same tensors"):
        average_checkpoints([tmp_path / "a", tmp_path / "deeper"], tmp_path / "avg")
    with pytest.raises(UserError, match="no model.safetensors"):
        average_checkpoints([tmp_path / "a", tmp_path / "nowhere"], tmp_path / "avg")
    with pytest.raises(UserError, match="no checkpoints"):
        average_checkpoints([], tmp_path / "avg")
