"""The tiny replicas of idefics3 (granite-docling's shape), paddleocr_vl and hunyuan_vl: each
folder loads in transformers through the checkpoint's own processor (PIL image processor,
chat template) and model class; `format=treedec` adds treedec's tokens, one token each; any
other format is one line. (That vLLM decodes them as transformers does: test_vllm_archs.py.)"""
import pytest
import torch
from PIL import Image

from treedec.errors import UserError
from treedec.formats.contract import CATEGORY_TOKENS, CONTROL
from treedec.models.replicas import build_replica

FAMILIES = ("idefics3", "paddleocr_vl", "hunyuan_vl")


@pytest.mark.parametrize("family", FAMILIES)
def test_replica_loads_and_prompts_as_its_family(tmp_path, family):
    import importlib

    from transformers import AutoModelForImageTextToText, AutoProcessor

    from treedec.models.pil_processors import use_pil_image_processors

    folder = build_replica(family, tmp_path / family, "treedec")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= names
    use_pil_image_processors()
    proc = AutoProcessor.from_pretrained(folder)
    assert "Pil" in type(proc.image_processor).__name__  # no torchvision needed
    for token in (*CONTROL, *CATEGORY_TOKENS):
        assert len(proc.tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    prompt = importlib.import_module(f"treedec.models.replicas.{family}").PROMPT
    text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}],
                                    add_generation_prompt=True)
    assert prompt in text
    image = Image.new("RGB", (80, 100), (255, 255, 255))
    inputs = proc(text=[text], images=[image], return_tensors="pt")
    n_image = int((inputs["input_ids"] == proc.image_token_id).sum())
    assert n_image >= 4  # the placeholder expanded into the image's tokens
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    assert model.config.model_type == family
    out = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 3


@pytest.mark.parametrize("family", FAMILIES)
def test_replica_refuses_another_format_in_one_line(tmp_path, family):
    with pytest.raises(UserError, match=f"{family} replica writes format"):
        build_replica(family, tmp_path / family, "dots_json")
