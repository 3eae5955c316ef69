"""The forced model on a device (issue 32.6): `model.device` names where its weights are made and
its adapter's inputs go; a device torch does not see is refused in one line."""
import pytest
import torch

from treedec.errors import UserError
from treedec.models.forced import ForcedModel


def test_the_model_and_its_adapter_are_on_the_device_named():
    vlm = ForcedModel("1m", vision_tokens=16, device="cpu")
    assert next(vlm.model.parameters()).device.type == "cpu" and vlm.adapter().device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is there")
def test_cuda_without_a_cuda_device_is_refused_in_one_line():
    with pytest.raises(UserError, match="no CUDA device"):
        ForcedModel("1m", device="cuda")
    with pytest.raises(UserError, match="model.device"):
        ForcedModel("1m", device="nonsense")
