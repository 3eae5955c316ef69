"""A normal run says what it must once and nothing else: the note that the default model
reads synthetic pages only (on other inputs), no transformers pad_token_id warning."""
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from conftest import ROOT
from treedec.commands.run_inputs import model_notes
from treedec.models.vlm import SHIPPED


@pytest.mark.parametrize("data, model, noted", [("images", {"name": "tiny", "path": None}, True),
                                                ("omnidocbench", {"name": "tiny", "path": None}, True),
                                                ("synth", {"name": "tiny", "path": None}, False),
                                                ("images", {"name": "tiny", "path": "/some/qwen3-vl"}, False),
                                                ("images", {"name": "random", "path": None}, False)])
def test_default_model_note_only_where_it_applies(data, model, noted):
    notes = model_notes(OmegaConf.create({"data": {"name": data}, "model": model}))
    assert bool(notes) == noted
    if noted:
        assert len(notes) == 1 and "synthetic pages only" in notes[0] and "model.path=" in notes[0]


def test_loading_the_shipped_model_does_not_warn_about_pad_token_id():
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped model in this checkout")
    code = ("from omegaconf import OmegaConf; from treedec.models.loader import load_vlm; "
            "v = load_vlm(OmegaConf.create({'name': 'tiny', 'path': None})); print(v.model.config.text_config.vocab_size)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pad_token_id" not in r.stderr and "128002" not in r.stderr, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) > 0
