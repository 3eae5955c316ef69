"""HSD is training-free (issue 33, item 6): on a checkpoint trained without crops (a Qwen3-VL
whose tokenizer has the flat and tree prompt tokens only) stage 1 reads each crop with the
checkpoint's page prompt, `flat`, its blocks' content the region's reading, and the pages
stay the base strategy's token for token (before: a one-line error, no crop mode). A
checkpoint may name its prompt per mode (`treedec_prompts.json`), e.g. a crop prompt in words."""
import json

import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.run.stages import drafts_ahead
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy
from treedec.strategies.hsd_stage1 import stage1_mode

from engine_helpers import ForcedTree
from lossless_helpers import assert_lossless, decode, own_drafts
from test_qwen3_vl import model_cfg, save_tiny_qwen3_vl

PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
BOXES = ["[62,62,938,312]", "[62,375,938,625]", "[62,688,938,938]"]
FORCED = EngineConfig(max_new_tokens=128)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.set_num_threads(1)
    return save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl"))  # prompt tokens <|flat|> and <|tree|> only


@pytest.mark.parametrize("name, base", [("hsd", "sequential"), ("padoc_hsd", "padoc")])
def test_stage1_reads_crops_with_the_page_prompt(checkpoint, name, base):
    vlm = load_vlm(model_cfg(checkpoint))
    tok = vlm.tokenizer
    assert not vlm.has_prompt("crop") and stage1_mode(vlm) == "flat"
    samples = [generate_page(s, PAGE) for s in range(2)]
    plain_strategy = build_strategy({"name": base}, tok)
    procs = [ForcedTree(len(vlm.prompt(samples[0].image, plain_strategy.mode).ids), 3, [14, 9, 11],
                        fork=base == "padoc", boxes=BOXES, tok=tok)]
    plain = decode(vlm, plain_strategy, samples, FORCED, procs)
    pages = own_drafts(samples, plain, plain_strategy)
    strategy = build_strategy({"name": name, "drafts": "oracle"}, tok)
    strategy, before = drafts_ahead(EmbeddedRuntime(EngineConfig(max_new_tokens=24)), vlm, strategy, pages)
    for s in samples:
        assert before[s.name]["stage1_prompt"] == "flat" and before[s.name]["stage1_crops"] == 3
        assert before[s.name]["stage1_steps"] > 0
    assert_lossless(plain, decode(vlm, strategy, pages, FORCED, procs))


def test_a_crop_read_as_a_page_is_drafted_as_one_and_its_blocks_are_its_reading():
    """Stage 1 with the page prompt: a region's draft is the flat form of a page holding that
    block alone (so its content is proposed after the box the model writes), and the reading
    is the content of the blocks the model wrote (a random model writes none: '')."""
    from types import SimpleNamespace

    from treedec.formats.contract import parse_flat
    from treedec.page import Block, Page
    from treedec.strategies.hsd_stage1 import crop_reading, page_draft

    block = Block("table", (3.0, 4.0, 50.0, 60.0), "<table><tr><td>a b</td></tr></table>")
    text = page_draft(block)
    assert text.startswith("<BLOCK><|table|>[0,0,1000,1000]<CHILD>") and not text.endswith("<eos>")
    assert [(b.category, b.content) for b in parse_flat(text, 80, 80).page.blocks] == [("table", block.content)]
    read = SimpleNamespace(text="x<eos>", page=Page(80, 80, [Block("title", (0, 0, 80, 10), "A", order=1),
                                                              Block("text_block", (0, 20, 80, 40), "b c", order=2)]))
    assert crop_reading(read, "flat") == "A\nb c" and crop_reading(read, "crop") == "x"


def test_a_checkpoint_names_its_prompt_per_mode(checkpoint, tmp_path):
    import shutil

    d = tmp_path / "named"
    shutil.copytree(checkpoint, d)
    (d / "treedec_prompts.json").write_text(json.dumps({"crop": "read the text"}))
    vlm = load_vlm(model_cfg(d))
    assert vlm.has_prompt("crop") and stage1_mode(vlm) == "crop"
    image = generate_page(0, PAGE).image
    assert vlm.tokenizer.decode(vlm.prompt(image, "crop").ids).endswith(
        "<|vision_end|>read the text<|im_end|>\n<|im_start|>assistant\n")
    assert vlm.tokenizer.decode(vlm.prompt(image, "tree").ids).endswith("<|vision_end|><|tree|><|im_end|>\n"
                                                                        "<|im_start|>assistant\n")
    with pytest.raises(UserError, match=r"lacks the prompt token <\|tree_rows\|> .* names no prompt for it"):
        vlm.prompt(image, "tree_rows")
    for bad, says in [({"crops": "x"}, "unknown prompt mode"), ({"crop": ""}, "non-empty prompt texts"),
                      (["crop"], "non-empty prompt texts")]:
        (d / "treedec_prompts.json").write_text(json.dumps(bad))
        with pytest.raises(UserError, match=says) as e:
            load_vlm(model_cfg(d))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("extra", [[], ["cost_model=true"]])
def test_padoc_hsd_runs_on_a_qwen3_vl_checkpoint_from_the_command_line(checkpoint, tmp_path, extra):
    """`run model.path=DIR strategy=padoc_hsd` with the default config (no cost model) and with
    cost_model=true: the cost model's step probes step dense on a model without page-blocked
    attention, as the engine does (before: a TypeError from Qwen3VLAdapter.step(pages=...))."""
    from cli_helpers import treedec_here

    out = tmp_path / "out"
    r = treedec_here("run", f"model.path={checkpoint}", "strategy=padoc_hsd", "data=synth", "data.pages=2",
                     "runtime.max_new_tokens=24", f"out={out}", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pages"] == 2
    assert ("projected_pages_per_s" in summary) == bool(extra)
    if extra:
        assert summary["projected_pages_per_s"] > 0
