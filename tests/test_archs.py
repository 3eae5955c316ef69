"""Real VLM architectures on the embedded engine (issue 54), on tiny random replicas that
`python -m treedec tiny` builds (`treedec.models.replicas`) and the loader reads as it
reads the real checkpoints: each family's prompt as its processor writes it, every page's
`output_ids` exactly transformers' own greedy `generate` on the page's `prompt_ids` and
the image processor's features, `check` agreeing (and able to disagree), the default
strategies running, and HSD lossless with drafts accepted."""
import inspect
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from treedec.results.check import NEAR_TIE, check_pages, compare
from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.errors import UserError
from treedec.models.loader import load_vlm
from treedec.models.families import FAMILIES
from treedec.models.instructions import PLAIN
from treedec.models.replicas import available, build_replica
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.run.stages import drafts_ahead, run_strategy
from treedec.strategies.base import build_strategy

from cli_helpers import treedec_here
from engine_helpers import ForcedTree
from lossless_helpers import assert_lossless, decode, own_drafts

# the transformers families of the embedded engine whose replica is in this checkout (the idefics3,
# paddleocr_vl and hunyuan_vl replicas come from the vLLM work)
TYPES = tuple(t for t in available() if t in FAMILIES)
PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
BOXES = ["[62,62,938,312]", "[62,375,938,625]", "[62,688,938,938]"]


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """(model_type, format) -> the replica's folder, each built once for the module."""
    torch.set_num_threads(1)
    built = {}

    def get(kind: str, fmt: str | None = None):
        if (kind, fmt) not in built:
            built[kind, fmt] = build_replica(kind, tmp_path_factory.mktemp(f"{kind}_{fmt}"), fmt, seed=0)
        return built[kind, fmt]

    return get


def noise(seed: int, width: int, height: int):
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    return Image.fromarray((torch.rand(height, width, 3, generator=g) * 255).byte().numpy())


def load(path, fmt=None):
    return load_vlm(OmegaConf.create({"name": "tiny", "path": str(path), "format": fmt}))


def processor_text(vlm, image) -> str:
    """The prompt with its image placeholder replaced by the family's processor in
    transformers (its own `replace_image_token`, called on the processor's attributes:
    the processors themselves want torchvision for their video processors)."""
    import transformers

    inputs = vlm.image_inputs(image)
    kind = vlm.model.config.model_type
    text = vlm.prompt_text("flat")
    if kind == "internvl":
        from treedec.models.families.internvl import image_seq_length

        hf = vlm.tokenizer.hf
        me = SimpleNamespace(start_image_token=hf.start_image_token, end_image_token=hf.end_image_token,
                             image_token=hf.context_image_token, image_seq_length=image_seq_length(vlm.model.config))
        new = transformers.InternVLProcessor.replace_image_token(me, inputs, 0)
        return text.replace(hf.context_image_token, new, 1)
    cls = {"qwen2_vl": transformers.Qwen2VLProcessor, "qwen2_5_vl": transformers.Qwen2_5_VLProcessor,
           "qwen3_vl": transformers.Qwen3VLProcessor, "paddleocr_vl": transformers.PaddleOCRVLProcessor}[kind]
    token = vlm.tokenizer.hf.convert_ids_to_tokens(vlm.tokenizer.image_id)
    me = SimpleNamespace(image_processor=vlm.image_processor, image_token=token)
    return text.replace(token, cls.replace_image_token(me, inputs, 0), 1)


def processor_ids(vlm, image) -> list[int] | None:
    """The prompt's ids by the family's own processor where it can be built without
    torchvision (Idefics3's and HunYuan-VL's have no video processor); None elsewhere."""
    import transformers

    kind = vlm.model.config.model_type
    if kind == "idefics3":
        from treedec.models.families.idefics3 import image_seq_len

        proc = transformers.Idefics3Processor(vlm.image_processor, vlm.tokenizer.hf,
                                              image_seq_len=image_seq_len(vlm.model.config))
        images = [[image]]
    elif kind == "hunyuan_vl":
        proc, images = transformers.HunYuanVLProcessor(vlm.image_processor, vlm.tokenizer.hf), [image]
    else:
        return None
    return proc(images=images, text=[vlm.prompt_text("flat")], add_special_tokens=False)["input_ids"][0]


@pytest.mark.parametrize("kind", TYPES)
def test_the_prompt_is_the_chat_template_expanded_as_the_processor_does(replica, kind):
    vlm = load(replica(kind))
    image = noise(0, 150, 90)
    p = vlm.prompt(image, "flat")
    by_processor = processor_ids(vlm, image)
    if by_processor is not None:
        assert p.ids == list(by_processor)
    else:
        assert p.ids == vlm.tokenizer.encode(processor_text(vlm, image))
    assert PLAIN["flat"] in vlm.tokenizer.decode(p.ids)
    assert p.ids.count(vlm.tokenizer.image_id) > 1 and not vlm.tokenizer.treedec_tokens


@pytest.mark.parametrize("kind", TYPES)
def test_output_ids_are_transformers_generate(replica, kind):
    """A page run by the engine (one page in flight): transformers' `generate` on the page's
    `prompt_ids` with the image processor's features gives exactly its `output_ids`."""
    vlm = load(replica(kind))
    sample = generate_page(1, PAGE)
    res = EmbeddedRuntime(EngineConfig(max_new_tokens=40, max_pages=1)).run(vlm, build_strategy({"name": "sequential"},
                                                                                                  vlm.tokenizer), [sample])
    rec = res.records[0].figures()
    assert rec["prompt"] == vlm.tokenizer.decode(rec["prompt_ids"]) and rec["raw_text"] == vlm.tokenizer.decode(
        rec["output_ids"])
    ids = torch.tensor([rec["prompt_ids"]])
    extra = vlm.family.generate_inputs(ids, vlm.image_inputs(sample.image), vlm.tokenizer.image_id)
    # mm_token_type_ids (1 at image tokens) given exactly where transformers' model takes them (M-RoPE's families)
    assert ("mm_token_type_ids" in extra) == ("mm_token_type_ids" in inspect.signature(vlm.model.forward).parameters)
    out = vlm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **extra, max_new_tokens=40,
                             do_sample=False, eos_token_id=list(vlm.tokenizer.eos_ids), pad_token_id=vlm.tokenizer.pad_id)
    assert out[0, ids.shape[1]:].tolist() == rec["output_ids"] and len(rec["output_ids"]) > 5


@pytest.mark.parametrize("kind", TYPES)
def test_check_agrees_and_can_disagree(replica, kind):
    vlm = load(replica(kind))
    samples = [SimpleNamespace(name=f"p{s}", image=noise(s, 100 + 40 * s, 90)) for s in range(2)]
    assert [c.verdict for c in check_pages(vlm, samples, "flat", 24)] == ["agrees"] * 2
    if vlm.family.rope_axes > 1:  # decoding without the page's M-RoPE delta is caught
        prompt = vlm.prompt
        vlm.prompt = lambda image, mode: replace(prompt(image, mode), position_offset=0)
        assert "diverged" in [c.verdict for c in check_pages(vlm, samples, "flat", 24)]


def test_a_divergence_is_a_near_tie_only_below_the_gap():
    logits = [torch.zeros(8), torch.tensor([0, 0, 1.0, 1.0 - NEAR_TIE / 2, 0, 0, 0, 0])]
    tie = compare("p", 5, [1, 3], [1, 2], logits)
    assert (tie.verdict, tie.diverged_at, tie.treedec_token, tie.transformers_token) == ("near_tie", 1, 3, 2)
    far = compare("p", 5, [1, 4], [1, 2], logits)
    assert far.verdict == "diverged" and far.gap == pytest.approx(1.0)
    assert compare("p", 5, [1, 2], [1, 2], logits).verdict == "agrees"


def test_check_from_the_command_line(replica, tmp_path):
    """`check` on a replica (what `python -m treedec tiny model_type=internvl` writes) exits 0
    with every page agreeing; an unknown replica is one line."""
    r = treedec_here("check", f"model.path={replica('internvl')}", "pages=2", "max_new_tokens=16",
                     f"out={tmp_path / 'c'}")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["pages"] == 2 and summary["agreeing_pages"] == 2 and summary["diverged_pages"] == 0
    pages = sorted((tmp_path / "c" / "pages").glob("*.json"))
    assert len(pages) == 2 and json.loads(pages[0].read_text())["verdict"] == "agrees"
    with pytest.raises(UserError, match="no tiny replica of model_type 'llama'; available: qwen2_vl, qwen2_5_vl"):
        build_replica("llama", tmp_path / "x")


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    return tmp_path_factory.mktemp("drafts")


@pytest.mark.parametrize("kind", TYPES)
def test_default_strategies_run(replica, drafts, kind):
    """sequential, hsd and crops with the run command's default config (a short token budget;
    hsd's pipeline drafts of the page cached once for the module: they depend on the page
    alone) on a replica in treedec's format: every page decoded, none dropped."""
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas
    from treedec.runtimes.select import make_runtime

    register_schemas()
    vlm = load(replica(kind, "treedec"), "treedec")
    samples = [generate_page(0, PAGE)]
    for name in ("sequential", "hsd", "crops"):
        with initialize_config_module("treedec.conf", version_base=None):
            cfg = compose("run", [f"strategy={name}", "runtime.max_new_tokens=24"]
                          + ([f"strategy.cache_dir={drafts}"] if name == "hsd" else []))
        res = run_strategy(make_runtime(cfg.runtime), vlm, build_strategy(cfg.strategy, vlm.tokenizer), samples,
                           progress=False, warmup=False, cold_drafts=False)
        assert [r.name for r in res.records] == [samples[0].name] and res.records[0].generated > 0, name


@pytest.mark.parametrize("kind", TYPES)
def test_hsd_with_its_own_drafts_is_sequential(replica, kind):
    """hsd with drafts from sequential's own pages (corrupted) gives sequential's output ids,
    drafts proposed, accepted and rejected."""
    vlm = load(replica(kind, "treedec"), "treedec")
    tok = vlm.tokenizer
    samples = [generate_page(s, PAGE) for s in range(2)]
    plain_strategy = build_strategy({"name": "sequential"}, tok)
    procs = [ForcedTree(len(vlm.prompt(samples[0].image, "flat").ids), 3, [14, 9, 11], fork=False, boxes=BOXES,
                        tok=tok)]
    ecfg = EngineConfig(max_new_tokens=128)
    plain = decode(vlm, plain_strategy, samples, ecfg, procs)
    pages = own_drafts(samples, plain, plain_strategy)
    strategy, _ = drafts_ahead(EmbeddedRuntime(EngineConfig(max_new_tokens=24)), vlm,
                               build_strategy({"name": "hsd", "drafts": "oracle"}, tok), pages)
    assert_lossless(plain, decode(vlm, strategy, pages, ecfg, procs))


@pytest.mark.parametrize("kind, fmt", [("idefics3", "doctags"), ("paddleocr_vl", "paddleocr")])
def test_crops_and_hsd_on_a_plain_checkpoint_in_its_own_format(replica, drafts, tmp_path, monkeypatch, kind, fmt):
    """On a replica without treedec's tokens, in its family's own format (DocTags: no layout pass,
    no crop prompt; PaddleOCR-VL: a detector's layout, a crop prompt per category): `crops` and
    `hsd` run with the run command's default config (the pipeline's layout and drafts, cached
    once for the module), and hsd with drafts from the baseline's own pages (`strategy.drafts=DIR`;
    the baseline: sequential, crops for paddleocr) gives the baseline's token ids with drafts accepted."""
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas
    from treedec.formats import get_format
    from treedec.io.omnidocbench import page_to_omnidocbench
    from treedec.runtimes.select import make_runtime

    register_schemas()
    monkeypatch.setenv("TREEDEC_DRAFT_CACHE", str(drafts))
    vlm, f = load(replica(kind), fmt), get_format(fmt)
    if f.two_stage:  # its crop prompt per category
        assert "Table Recognition:" in vlm.prompt_text("crop", "table") and "OCR:" in vlm.prompt_text("crop", "title")
    else:  # DocTags names no crop prompt: crops are read with the page prompt
        assert not vlm.has_prompt("crop") and vlm.has_prompt("flat")
    samples = [generate_page(0, PAGE)]

    def run(name, *over):
        with initialize_config_module("treedec.conf", version_base=None):
            cfg = compose("run", [f"strategy={name}", "runtime.max_new_tokens=24", *over])
        res = run_strategy(make_runtime(cfg.runtime), vlm, build_strategy(cfg.strategy, vlm.tokenizer, f), samples,
                           progress=False, warmup=False, cold_drafts=False)
        assert [r.name for r in res.records] == [samples[0].name] and res.records[0].generated > 0, name
        return res

    base = run("crops" if f.two_stage else "sequential")
    crops, hsd = run("crops"), run("hsd")
    assert crops.records[0].decoding.graph[0].generated == 0  # no layout pass: the pipeline's layout
    if not f.two_stage:  # stage 1 read the pipeline's regions with the page prompt, drafted as DocTags pages
        assert hsd.records[0].stage_figures["stage1_prompt"] == "flat" and hsd.records[0].stage_figures["stage1_crops"]
    for rec in base.records:
        (tmp_path / f"{rec.name}.json").write_text(json.dumps(page_to_omnidocbench(rec.page)))
    own = run("hsd", f"strategy.drafts={tmp_path}")

    def ids(rec):  # the page's stream (sequential's), or every crop's read (crops')
        return [list(s.tokens) for s in rec.decoding.graph.streams] if f.two_stage else rec.kept["output_ids"]

    assert [ids(r) for r in own.records] == [ids(r) for r in base.records]
    assert sum(r.accepted for r in own.records) > 0


def test_a_plain_checkpoint_refuses_what_needs_treedec_tokens(replica):
    vlm = load(replica("qwen2_vl"))
    assert vlm.has_prompt("flat") and vlm.has_prompt("crop") and not vlm.has_prompt("tree")
    with pytest.raises(UserError, match="has no treedec tokens") as e:
        decode(vlm, build_strategy({"name": "padoc"}, vlm.tokenizer), [generate_page(0, PAGE)], EngineConfig(max_new_tokens=8))
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="lacks treedec's tokens"):
        load(replica("qwen2_vl"), "treedec")


def test_generation_settings_greedy_cannot_honour_are_refused(replica, tmp_path):
    import shutil

    d = tmp_path / "penalised"
    shutil.copytree(replica("qwen3_vl"), d)
    cfg = json.loads((d / "generation_config.json").read_text())
    (d / "generation_config.json").write_text(json.dumps({**cfg, "repetition_penalty": 1.05}))
    with pytest.raises(UserError, match=r"sets repetition_penalty=1.05, which treedec's greedy decoding cannot") as e:
        load(d)
    assert "\n" not in str(e.value)
    vlm = load(replica("qwen3_vl"))  # its two end ids (<|im_end|>, <|endoftext|>) both end a stream
    assert vlm.tokenizer.eos_ids == tuple(cfg["eos_token_id"])


def test_crops_in_dots_json_asks_its_layout_pass_on_a_plain_checkpoint(replica):
    """A plain checkpoint read as dots.ocr (`model.format=dots_json`): `crops` asks its layout pass
    with dots.ocr's layout-only prompt and its crops with `prompt_ocr`; a random model's garbled
    layout gives the page, flagged with what could not be read, never an exception."""
    from treedec.formats import get_format
    from treedec.formats.dots_json import LAYOUT_PROMPT, OCR_PROMPT

    vlm, f = load(replica("qwen2_vl"), "dots_json"), get_format("dots_json")
    assert LAYOUT_PROMPT in vlm.prompt_text("layout") and OCR_PROMPT in vlm.prompt_text("crop", "table")
    samples = [generate_page(0, PAGE)]
    res = run_strategy(EmbeddedRuntime(EngineConfig(max_new_tokens=24)), vlm,
                       build_strategy({"name": "crops"}, vlm.tokenizer, f), samples,
                       progress=False, warmup=False, cold_drafts=False)
    rec = res.records[0]
    assert [r.name for r in res.records] == [samples[0].name]
    assert LAYOUT_PROMPT in rec.kept["prompt"] and rec.decoding.graph[0].generated > 0  # its own layout pass ran
    assert any(fl.startswith("repaired: layout: ") for fl in rec.flags), rec.flags  # garbled: flagged


@pytest.mark.parametrize("kind", TYPES)
def test_the_server_answers_as_transformers_generate(replica, kind):
    """A request through `treedec serve` (a system turn; the text before the image for every other
    family; an RGBA PNG): its greedy ids are transformers' `generate` on the same messages through
    the checkpoint's own chat template and image processor."""
    pytest.importorskip("fastapi")
    import httpx
    from PIL import Image

    from serve_helpers import messages, serving
    from treedec.results.check import transformers_generate
    from treedec.serve.images import rgb

    text_first = TYPES.index(kind) % 2 == 1
    image = noise(3, 120, 90).convert("RGBA")
    image.putalpha(Image.new("L", image.size, 200))
    with serving([f"model.path={replica(kind)}"]) as (url, server):
        body = {"model": kind, "messages": messages(image, "Read the page.", system="You parse documents.",
                                                    text_first=text_first),
                "max_tokens": 24, "temperature": 0, "skip_special_tokens": False, "return_token_ids": True}
        got = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).json()
        parts = [{"type": "image"}, {"type": "text", "text": "Read the page."}]
        turns = [{"role": "system", "content": [{"type": "text", "text": "You parse documents."}]},
                 {"role": "user", "content": parts[::-1] if text_first else parts}]
        prompt = server.vlm.chat_prompt(turns, rgb(image))
    want, _ = transformers_generate(server.vlm, prompt, 24)
    stopped = bool(want) and want[-1] in server.vlm.tokenizer.eos_ids
    assert got["prompt_token_ids"] == prompt.ids and got["choices"][0]["token_ids"] == want[:len(want) - stopped]
    assert got["choices"][0]["finish_reason"] == ("stop" if stopped else "length") and len(want) > 5
