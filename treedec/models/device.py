"""`model.device`'s default, one rule for every model that takes one: null means CUDA where torch
sees a GPU, else the CPU."""
from __future__ import annotations

import torch


def model_device(device: str | None) -> torch.device:
    """The device a model with `model.device=device` runs on (null: cuda where torch sees one, else cpu)."""
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
