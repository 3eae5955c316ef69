"""runtime=vllm on real architectures: a tiny random replica per family that vLLM serves here
(`idefics3` in granite-docling's shape, `paddleocr_vl`, `hunyuan_vl` through vLLM's
Transformers backend), one page, fp32, greedy: vLLM's engine (the one `runtime=vllm` builds,
`treedec.runtimes.vllm.engine`) expands the chat-template prompt into the ids the
checkpoint's processor expands and writes the ids transformers' own `generate` writes.
A family whose vLLM module needs torchvision (not importable beside CPU torch here) is
refused in one line. One engine per family for the module (an engine starts in seconds here).

`padoc` (one request per stream, prefix caching) and `crops` (layout pass, then every region's
crop read, several images in flight) run on each family's replica in treedec's format, the
page tree and the crops' reads forced on both runtimes alike (`vllm_forced.py`: the model
still picks every letter), and give the embedded engine's ids, every stream of every page
and crop. vLLM refuses custom logits processors beside speculative decoding, so that is a
second engine per family, closed after its runs. `check runtime=vllm` on the command line:
vLLM's ids against transformers' `generate`, per page. A crop is asked its region's crop prompt
(paddleocr's `Table Recognition:` ...) on vLLM as on the embedded engine (no engine started)."""
import json
import re
import subprocess
import sys

import pytest
import torch
from PIL import Image

from treedec.errors import UserError

FAMILIES = ("idefics3", "paddleocr_vl", "hunyuan_vl")
NEW = 12  # tokens per page: enough to cross several decode steps, few enough to stay fast
K = 4  # draft tokens per step (hsd's page-draft proposer)


_ENGINES: list = []  # the runtime's engines object (`treedec.runtimes.vllm.engine.VLLMEngines`), one for the module


@pytest.fixture(scope="module", autouse=True)
def _close_engines():
    yield
    for engines in _ENGINES:
        engines.close()
    _ENGINES.clear()


def served(folder, cfg, prompt_len: int):
    """runtime=vllm's engine for `folder` and `cfg`, kept for the module (`treedec.runtimes.vllm.engine`)."""
    from treedec.runtimes.vllm.engine import VLLMEngines

    if not _ENGINES:
        _ENGINES.append(VLLMEngines())
    return _ENGINES[0].engine(folder, cfg, prompt_len)


def engine_cfg():
    """runtime=vllm's config for the module's one engine per family: the page-draft proposer
    installed (as for hsd; an empty draft store proposes nothing: plain greedy decoding)."""
    from treedec.runtimes.vllm.drafts import PROPOSER
    from treedec.runtimes.vllm.engine import VLLMConfig

    return VLLMConfig(max_new_tokens=NEW, max_pages=1, engine_args={"per_request_spec_decode_metrics": "detailed"},
                      speculative_config={"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": K})


def _vllm_or_skip():
    try:
        import vllm  # noqa: F401
    except Exception as e:
        pytest.skip(f"vLLM is not importable here ({type(e).__name__}); scripts/install_vllm.sh installs it")


def page() -> Image.Image:
    """A noisy 100x80 page: not square, so every family resizes it and (paddleocr_vl,
    hunyuan_vl) resamples its learned position grid to a grid of another shape."""
    g = torch.Generator().manual_seed(1)
    return Image.fromarray((torch.rand(100, 80, 3, generator=g) * 255).byte().numpy())


def hf_generate(folder, prompt_text: str, image):
    """(the prompt ids the checkpoint's processor expands, transformers' greedy ids), fp32."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from treedec.models.pil_processors import use_pil_image_processors

    use_pil_image_processors()  # HunyuanOCR's PIL image processor (transformers gates it on torchvision)
    proc = AutoProcessor.from_pretrained(folder)
    text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                  {"type": "text", "text": prompt_text}]}],
                                    add_generation_prompt=True)
    inputs = proc(text=[text], images=[image], return_tensors="pt")
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    out = model.generate(**inputs, max_new_tokens=NEW, do_sample=False)
    n = inputs["input_ids"].shape[1]
    unexpanded = proc.tokenizer(text, add_special_tokens=False)["input_ids"]
    return unexpanded, inputs["input_ids"][0].tolist(), out[0, n:].tolist()


def vllm_generate(folder, prompt_ids: list[int], image, drafts: list[list[int]] = ()):
    """(the prompt ids vLLM's processor expanded, vLLM's greedy ids, draft tokens accepted)
    on runtime=vllm's engine, its page-draft proposer serving `drafts`."""
    from vllm import SamplingParams

    engine = served(folder, engine_cfg(), len(prompt_ids))
    engine.drafts.write([list(d) for d in drafts], 3, 10)  # HSD's w_min, w_max
    params = SamplingParams(temperature=0.0, max_tokens=NEW, skip_special_tokens=False, detokenize=False)
    engine.engine.add_request(f"page{len(drafts)}", {"prompt_token_ids": prompt_ids,
                                                     "multi_modal_data": {"image": image}}, params)
    outs = []
    while engine.engine.has_unfinished_requests():
        outs += engine.engine.step()
    engine.drafts.clear()
    out = outs[-1].outputs[0]
    return list(outs[-1].prompt_token_ids), list(out.token_ids), out.spec_decode_metrics


@pytest.fixture(scope="module", params=FAMILIES)
def decoded(request, tmp_path_factory):
    _vllm_or_skip()
    import importlib

    from treedec.models.replicas import build_replica

    family = request.param
    folder = build_replica(family, tmp_path_factory.mktemp(family))
    prompt_text = importlib.import_module(f"treedec.models.replicas.{family}").PROMPT
    unexpanded, hf_prompt, hf_ids = hf_generate(folder, prompt_text, page())
    vllm_prompt, vllm_ids, _ = vllm_generate(folder, unexpanded, page())
    return family, hf_prompt, hf_ids, vllm_prompt, vllm_ids, (folder, unexpanded, prompt_text)


@pytest.mark.xdist_group("vllm")
def test_vllm_decodes_as_transformers_generate(decoded):
    family, hf_prompt, hf_ids, vllm_prompt, vllm_ids, _ = decoded
    assert vllm_prompt == hf_prompt, family  # the image expanded as the checkpoint's processor does
    assert len(hf_ids) == NEW and len(set(hf_ids)) > 3, family  # a real decode, not one token repeated
    assert vllm_ids == hf_ids, (family, next(i for i, (a, b) in enumerate(zip(vllm_ids, hf_ids)) if a != b))


@pytest.mark.xdist_group("vllm")
def test_a_family_needing_torchvision_is_refused_in_one_line(tmp_path):
    """Qwen3-VL: vLLM 0.32's module imports transformers' torchvision image processor."""
    _vllm_or_skip()
    try:
        import torchvision  # noqa: F401
        pytest.skip("torchvision imports here: vLLM's Qwen3-VL module is served")
    except Exception:
        pass
    from test_qwen3_vl import save_tiny_qwen3_vl

    from treedec.runtimes.vllm.engine import VLLMConfig

    folder = save_tiny_qwen3_vl(tmp_path / "qwen3_vl")
    with pytest.raises(UserError) as e:
        served(folder, VLLMConfig(max_new_tokens=4, max_pages=1), 64)
    line = str(e.value)
    assert "\n" not in line and "qwen3_vl" in line and "torchvision" in line and "pip install" in line


class CheckpointPrompts:
    """What runtime=vllm asks of a real architecture's page model (`treedec/runtimes/vllm/prompts.py`; the
    loader's `CheckpointVLM` has it): its folder, the chat-template prompt with one image
    placeholder, the page's prompt with the image expanded (by the checkpoint's own
    processor here), and the tokenizer's ids."""

    def __init__(self, folder, prompt_text: str):
        from types import SimpleNamespace

        from transformers import AutoProcessor, AutoTokenizer

        self.directory, self.proc = folder, AutoProcessor.from_pretrained(folder)
        hf = AutoTokenizer.from_pretrained(folder)
        image_id = hf.convert_tokens_to_ids(self.proc.image_token)
        self.tokenizer = SimpleNamespace(eos_id=hf.eos_token_id, eos_ids=(hf.eos_token_id,), image_id=image_id,
                                         encode=lambda text: hf(text, add_special_tokens=False)["input_ids"])
        self.text = self.proc.apply_chat_template([{"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": prompt_text}]}], add_generation_prompt=True)

    def prompt_text(self, mode: str, category: str | None = None) -> str:
        return self.text

    def prompt(self, image, mode: str, category: str | None = None):
        from treedec.models.adapter import Prompt

        return Prompt(self.proc(text=[self.text], images=[image], return_tensors="pt")["input_ids"][0].tolist())


@pytest.mark.xdist_group("vllm")
def test_the_vllm_runner_serves_the_architecture(decoded):
    """`runtime=vllm`'s runner (`VLLMRunner`: the page's graph root = the expanded prompt,
    its request = that prompt folded to one placeholder) decodes the page with sequential
    as transformers' `generate` does."""
    from treedec.runtimes.vllm.runner import VLLMRunner
    from treedec.strategies.base import STRATEGIES

    family, hf_prompt, hf_ids, _, _, (folder, unexpanded, prompt_text) = decoded
    model = CheckpointPrompts(folder, prompt_text)
    cfg = engine_cfg()
    engine = served(folder, cfg, len(unexpanded))  # the fixture's engine
    strategy = STRATEGIES.get("sequential")(model.tokenizer)
    (result,) = list(VLLMRunner(engine, model, strategy, cfg).run([("page", page(), None)]))
    root = result.graph[0]
    assert root.tokens[:len(hf_prompt)] == hf_prompt, family
    assert root.tokens[len(hf_prompt):] == hf_ids, family
    assert result.steps == NEW, family  # one engine step per token (the prefill gives the first)


@pytest.mark.xdist_group("vllm")
def test_page_drafts_are_accepted_and_change_no_id(decoded):
    """hsd's page-draft proposer on the architecture: drafts from the model's own output
    (the page's draft prefixed with the prompt's tail, as `treedec.runtimes.vllm.hsd.write_drafts` lays a root
    draft out) are accepted, and vLLM still writes transformers' ids."""
    family, _, hf_ids, _, _, (folder, unexpanded, _) = decoded
    _, ids, metrics = vllm_generate(folder, unexpanded, page(), drafts=[unexpanded[-10:] + hf_ids])
    assert ids == hf_ids, family
    assert metrics is not None and metrics.num_draft_tokens > 0, family
    assert sum(metrics.per_step_accepted) > 0, family
    assert len(metrics.per_step_drafted) < NEW, family  # fewer verify steps than tokens: drafts saved steps


@pytest.mark.xdist_group("vllm")
def test_runtime_vllm_gives_the_embedded_engines_ids(tmp_path):
    """`runtime=vllm` end to end on a checkpoint the loader reads by model_type (paddleocr_vl:
    M-RoPE, the page's own resolution): sequential's every page, token id for token id, as
    the embedded engine. Needs the loader of real checkpoints (`CheckpointVLM`)."""
    _vllm_or_skip()
    pytest.importorskip("treedec.models.checkpoint_vlm", reason="the loader of real checkpoints is not in this checkout")
    from treedec.data.synth import generate_page
    from treedec.engine.engine import EngineConfig
    from treedec.models.loader import load_model
    from treedec.models.replicas import build_replica
    from treedec.run.stages.recording import run_with_ids
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import STRATEGIES

    folder = build_replica("paddleocr_vl", tmp_path / "paddleocr_vl")
    vlm = load_model(folder)
    samples = [generate_page(seed) for seed in (1, 2)]
    strategy = STRATEGIES.get("sequential")(vlm.tokenizer)
    _, emb = run_with_ids(EmbeddedRuntime(EngineConfig(max_new_tokens=NEW, max_pages=2)), vlm, strategy, samples)
    runtime = VLLMRuntime(VLLMConfig(max_new_tokens=NEW, max_pages=2), folder)
    try:
        _, vll = run_with_ids(runtime, vlm, strategy, samples)
    finally:
        runtime.close()  # its engine (no proposer: not the module's)
    assert sorted(emb) == [s.name for s in samples]
    assert vll == emb
    assert all(len(streams[0][3]) > NEW for streams in emb.values())  # prompt + generated ids


# padoc and crops: a forced tree of 2 regions (their boxes, content lengths), the layout's ~39 tokens within budget
BOXES = ["[62,62,938,438]", "[62,562,938,938]"]
LENGTHS = [5, 4]
CROP_LEN = 3  # letters a crop's read writes before its <eos>
TREE_NEW = 44


@pytest.fixture(scope="module", params=FAMILIES)
def tree_runs(request, tmp_path_factory):
    """(family, {strategy: ((embedded result, ids), (vLLM result, ids))}): padoc and crops on
    the family's replica in treedec's format, one page (its crops: two in flight), the tree
    forced alike."""
    _vllm_or_skip()
    from treedec.data.synth import SynthConfig, generate_page
    from treedec.engine.engine import EngineConfig
    from treedec.models.loader import load_model
    from treedec.models.replicas import build_replica
    from treedec.run.stages.recording import run_with_ids
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import STRATEGIES

    from vllm_forced import ForcedEmbedded, forced_logits_class, forced_plan, use_plan

    family = request.param
    folder = build_replica(family, tmp_path_factory.mktemp(f"{family}_treedec"), "treedec")
    vlm = load_model(folder, fmt="treedec")
    plan = forced_plan(vlm, len(BOXES), LENGTHS, BOXES, CROP_LEN)
    use_plan(plan)  # the forced engine below takes it when built
    page = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
    samples = [generate_page(0, page)]
    vllm = VLLMRuntime(VLLMConfig(max_new_tokens=TREE_NEW, max_pages=2,
                                  engine_args={"logits_processors": [forced_logits_class()]}), folder)
    runs = {}
    try:
        for name in ("padoc", "crops"):
            strategy = STRATEGIES.get(name)(vlm.tokenizer)
            emb = run_with_ids(ForcedEmbedded(EngineConfig(max_new_tokens=TREE_NEW, max_pages=2), plan), vlm, strategy,
                               samples)
            runs[name] = (emb, run_with_ids(vllm, vlm, strategy, samples))
    finally:
        vllm.close()
    return family, runs


@pytest.mark.xdist_group("vllm")
def test_padoc_and_crops_on_vllm_give_the_embedded_engines_ids(tree_runs):
    """Every stream of every page (and, for crops, of every crop's read), token id for token
    id, with the same steps, streams and flags; the layout forked (padoc: each branch a request
    of its own, its prefix served from the cache) and its regions were read (crops). One test
    per family: its runs are made once, on one worker."""
    family, runs = tree_runs
    for strategy, ((emb, emb_ids), (vll, vll_ids)) in runs.items():
        assert sorted(vll_ids) == sorted(emb_ids), (family, strategy)
        for name, streams in emb_ids.items():
            assert vll_ids[name] == streams, (family, strategy, name, [s[:3] for s in streams])
        assert [r.name for r in vll.records] == [r.name for r in emb.records]
        for e, v in zip(emb.records, vll.records):
            assert (v.text, v.streams, v.flags, v.steps) == (e.text, e.streams, e.flags, e.steps), (family, strategy)
            assert v.streams == 1 + len(BOXES), (family, strategy)  # the root and a branch (a crop's read) per region
            g = v.decoding.graph
            branches = [g[k].generated for k in g.children(0)]
            if strategy == "padoc":  # each branch wrote its region's forced letters and <eos>
                assert branches == [n + 1 for n in LENGTHS], family
                assert v.extra["cached_prompt_tokens"] > 0, family  # branches reuse the cached prefix
            else:  # each region's read: its crop's forced letters and <eos>
                assert branches == [CROP_LEN + 1] * len(BOXES), family
        if strategy == "crops":  # each region read from its own crop, a run of its own, recorded on both runtimes
            assert len([n for n in vll_ids if "#" in n]) == len(BOXES) * len(vll.records), family


@pytest.mark.xdist_group("vllm")
def test_what_vllm_cannot_do_for_a_family_is_refused_in_one_line(tmp_path):
    """paddleocr_vl decodes as transformers does only with the mends of treedec/runtimes/vllm/compat.py, made in this
    process: tensor parallelism (worker processes) is refused; so is data parallelism on any
    checkpoint by model_type (its workers load treedec's own VLM). Both before an engine starts."""
    _vllm_or_skip()
    from treedec.data.synth import generate_page
    from treedec.models.loader import load_model
    from treedec.models.replicas import build_replica
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import STRATEGIES

    folder = build_replica("paddleocr_vl", tmp_path / "paddleocr_vl")
    vlm = load_model(folder)
    strategy = STRATEGIES.get("sequential")(vlm.tokenizer)
    for option, says in (({"tensor_parallel_size": 2}, "paddleocr_vl with tensor_parallel_size=1 only"),
                         ({"data_parallel_size": 2}, "on one engine here (data_parallel_size=1)")):
        runtime = VLLMRuntime(VLLMConfig(max_new_tokens=4, **option), folder)
        with pytest.raises(UserError, match=re.escape(says)) as e:
            runtime.run(vlm, strategy, [generate_page(0)], progress=False, warmup=False)
        assert "\n" not in str(e.value) and not runtime.engines.engines  # refused before any engine started
        runtime.close()


@pytest.mark.xdist_group("vllm")
def test_check_with_runtime_vllm_from_the_command_line(tmp_path):
    """`python -m treedec check model.path=DIR runtime=vllm` on a replica: per page, vLLM's ids
    checked against transformers' `generate` beside the engine's; every page agrees, exit 0."""
    _vllm_or_skip()
    from treedec.models.replicas import build_replica

    from conftest import ROOT

    folder = build_replica("hunyuan_vl", tmp_path / "hunyuan_vl")
    r = subprocess.run([sys.executable, "-m", "treedec", "check", f"model.path={folder}", "runtime=vllm", "pages=2",
                        "max_new_tokens=16", f"out={tmp_path / 'c'}"], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["runtime"] == "vllm" and summary["agreeing_pages"] == 2
    assert (summary["vllm_agreeing_pages"], summary["vllm_diverged_pages"]) == (2, 0)
    for f in sorted((tmp_path / "c" / "pages").glob("*.json")):
        page = json.loads(f.read_text())
        assert page["verdict"] == page["runtime"]["verdict"] == "agrees", f.name


def test_a_prompt_vllm_expanded_into_other_ids_is_flagged():
    """The runner compares each stream's prompt as vLLM expanded it with the stream's context
    (the model's own expansion, what the embedded engine feeds) and flags a difference."""
    from treedec.engine.page_decoding import PageDecoding
    from treedec.runtimes.vllm.runner import _check_prompt, _Requests

    page = _Requests(record=PageDecoding(name="p", sample=None), pid=0, prompt=None, uuid="")
    root = page.graph.root([1, 5, 5, 5, 2], label="root")
    branch = page.graph.fork(root.id, 5, [7], label="b")
    _check_prompt(page, branch.id, [1, 5, 5, 5, 2, 7])
    assert page.record.flags == []
    _check_prompt(page, root.id, [1, 5, 5, 2])
    (flag,) = page.record.flags
    assert flag.startswith("vllm: stream 0 (root)") and "(4 / 5 ids, first difference at 3)" in flag


# a crop's prompt per category (format paddleocr's crop prompts): the words each category's prompt says
CROP_PROMPTS = {"table": "Table Recognition:", "text": "OCR:", "equation_isolated": "Formula Recognition:"}


@pytest.fixture(scope="module")
def paddleocr_crops(tmp_path_factory):
    """paddleocr_vl's replica in format paddleocr (its crop prompts per category), a crop reader on it."""
    pytest.importorskip("treedec.models.checkpoint_vlm", reason="the loader of real checkpoints is not in this checkout")
    from treedec.models.loader import load_model
    from treedec.models.replicas import build_replica
    from treedec.strategies.base import Strategy
    from treedec.strategies.crop_read import crop_target

    vlm = load_model(build_replica("paddleocr_vl", tmp_path_factory.mktemp("paddleocr_vl_crops"), "paddleocr"),
                     fmt="paddleocr")
    return vlm, Strategy("crops_read", "crop", vlm.tokenizer, crop_target)


class AddedRequests:
    """Stands for vLLM's engine in a runner: keeps the requests added (no engine started)."""

    def __init__(self):
        self.added: list[dict] = []

    def add_request(self, rid, prompt, params):
        self.added.append(prompt)


def one_placeholder(ids: list[int], image_id: int) -> list[int]:
    """`ids` with each run of image tokens (an image expanded) folded back to one placeholder."""
    return [t for i, t in enumerate(ids) if t != image_id or i == 0 or ids[i - 1] != image_id]


def test_a_crop_is_asked_its_categorys_prompt_on_vllm(paddleocr_crops):
    """runtime=vllm's runner admits a table crop, a text crop and a formula crop each with its
    category's crop prompt: the graph's root holds the embedded engine's prompt ids for the
    same sample, and the request vLLM is given is those ids with the image folded to one
    placeholder (before: every crop was asked the format's default crop prompt, `OCR:`)."""
    _vllm_or_skip()
    from types import SimpleNamespace

    from treedec.data.sample import Sample
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.engine import VLLMConfig
    from treedec.runtimes.vllm.runner import VLLMRunner

    vlm, strategy = paddleocr_crops
    engine, image_id = AddedRequests(), vlm.tokenizer.image_id
    runner = VLLMRunner(SimpleNamespace(engine=engine, drafts=None), vlm, strategy, VLLMConfig(max_new_tokens=4))
    requests = {}
    for category, words in CROP_PROMPTS.items():
        crop = Sample(f"p#{category}", None, page(), category=category)
        embedded = EmbeddedRuntime().prompt(vlm, strategy, crop).ids
        runner._admit(crop.name, crop.image, crop, 0.0)
        (admitted,) = [p for p in runner.active.values() if p.record.name == crop.name]
        assert admitted.graph[0].tokens == embedded, category
        request = engine.added[-1]["prompt_token_ids"]
        assert request.count(image_id) == 1 < embedded.count(image_id), category  # one placeholder, vLLM expands it
        assert request == one_placeholder(embedded, image_id), category
        assert words in vlm.tokenizer.decode(request), category
        requests[category] = request
    assert len({tuple(r) for r in requests.values()}) == len(CROP_PROMPTS)  # each crop its own prompt


def test_hsd_crop_drafts_are_headed_by_their_categorys_prompt(paddleocr_crops):
    """vLLM's draft store (`treedec.runtimes.vllm.hsd.write_drafts`): a crop's drafts are headed by the tail of
    its own category's prompt, the ids its request ends with, so the proposer matches them from
    the crop's first step (a window reaching back into the category's words)."""
    from types import SimpleNamespace

    from treedec.data.sample import Sample
    from treedec.drafters.ngram import NgramMatcher
    from treedec.drafters.page_drafts import SequenceDrafter
    from treedec.runtimes.vllm.hsd import write_drafts
    from treedec.runtimes.vllm.prompts import page_prompt

    vlm, strategy = paddleocr_crops
    w = 25  # the window reaches back over every category's words (their prompts: 26 to 35 ids here)
    drafter = SequenceDrafter(NgramMatcher(w_max=w))
    crops = [Sample(f"p#{c}", None, page(), category=c) for c in CROP_PROMPTS]
    for k, crop in enumerate(crops):
        drafter.use(crop.name, [[100 + k, 101 + k]])
    written = []
    store = SimpleNamespace(write=lambda seqs, w_min, w_max: written.extend(seqs))
    write_drafts(store, vlm, SimpleNamespace(drafter=drafter, mode="crop"), crops)
    assert len(written) == len(crops)
    for crop, seq in zip(crops, written):
        served = page_prompt(vlm, "crop", crop.image, crop.category).served
        assert seq[:w] == served[-w:] and seq[w:] == drafter.seqs[crop.name][0], crop.category
        assert CROP_PROMPTS[crop.category] in vlm.tokenizer.decode(seq[:w]), crop.category
