"""Planar (two-dimensional) rotary positions for image patches: the mapping, incremental
decoding against one full forward, and a checkpoint that keeps them."""
from dataclasses import replace

import pytest
import torch
from PIL import Image

from treedec.errors import UserError
from treedec.models.planar_rope import planar_axes
from treedec.models.vlm import VLM, VLMSpec

SPEC = VLMSpec(image_size=48, vision_hidden=32, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=2,
               head_dim=32, positions="planar")


def test_planar_axes_give_patches_their_row_and_column():
    # prompt: 2 tokens, a 3 x 3 image from index 2, then text
    t, h, w = planar_axes(torch.arange(14), start=2, side=3).tolist()
    assert t == [0, 1] + [2] * 9 + [5, 6, 7]
    assert h == [0, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6, 7]
    assert w == [0, 1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 5, 6, 7]


def test_text_sits_a_page_width_from_its_glyphs_at_every_page_size():
    for side in (3, 16, 40):
        n = side * side
        first_text = 2 + n
        t, h, w = planar_axes(torch.tensor([first_text, 2 + n - 1]), start=2, side=side)  # text, last patch
        assert t[0] - t[1] == side  # one page-width on, not n positions (linear: n)
        assert (h[0] - h[1], w[0] - w[1]) == (1, 1)


def test_unknown_positions_is_one_line():
    with pytest.raises(UserError, match="linear or planar"):
        VLMSpec(positions="spiral")


def _full_and_stepped(vlm: VLM, text: list[int]):
    prompt = vlm.prompt(Image.new("RGB", (48, 48), "white"), "flat")
    ids = torch.tensor([prompt.ids + text])
    with torch.inference_mode():
        full = vlm.model(input_ids=ids, **prompt.inputs).logits[0, len(prompt.ids) - 1:].float()
    adapter = vlm.adapter()
    first, kv = adapter.prefill(prompt)
    cache = adapter.new_cache()
    for layer, (k, v) in enumerate(kv):
        cache.update(k, v, layer)
    rows = [first]
    for i, tok in enumerate(text):
        pos = torch.tensor([len(prompt.ids) + i])
        mask = torch.zeros(1, len(prompt.ids) + i + 1)  # the one new row sees every slot
        rows.append(adapter.step(torch.tensor([tok]), pos, mask, cache)[0].float())
    return full, torch.stack(rows)


def test_planar_model_decodes_step_by_step_as_in_one_forward():
    vlm = VLM.tiny(SPEC, seed=3)
    text = vlm.tokenizer.encode("ab [1,2]")
    full, stepped = _full_and_stepped(vlm, text)
    assert full.shape == stepped.shape == (len(text) + 1, full.shape[1])
    assert torch.allclose(full, stepped, atol=1e-4), (full - stepped).abs().max()
    linear = VLM.tiny(replace(SPEC, positions="linear"), seed=3)
    assert not torch.allclose(_full_and_stepped(linear, text)[0], full, atol=1e-3)  # the positions do matter


def test_planar_checkpoint_keeps_its_positions(tmp_path):
    vlm = VLM.tiny(SPEC, seed=4)
    back = VLM.load(vlm.save(tmp_path / "ckpt"))
    assert back.spec.positions == "planar"
    text = vlm.tokenizer.encode("xy")
    assert torch.allclose(_full_and_stepped(vlm, text)[1], _full_and_stepped(back, text)[1], atol=1e-5)


def test_vllm_refuses_planar_positions_in_one_line():
    from treedec.runtimes.vllm.runtime import VLLMRuntime
    from treedec.strategies.base import build_strategy

    vlm = VLM.tiny(SPEC)
    with pytest.raises(UserError, match="linear positions only"):
        VLLMRuntime()._served(vlm, build_strategy({"name": "sequential"}, vlm.tokenizer))
