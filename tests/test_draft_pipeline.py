"""Drafting beside decoding: the engine steps while the next item is not ready (None), the draft
queue's workers give the in-process drafts byte for byte and read no further ahead than
allowed, and padoc_hsd with drafter workers parses the same pages as with drafting first."""
import json

import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import CausalLMAdapter
from treedec.strategies.base import STRATEGIES

from conftest import shared_drafters
from engine_helpers import TOK, ForcedTree, prompt, tiny_llama


# --- the engine: items not ready (None) ------------------------------------------------------

def _forced_run(items):
    model = tiny_llama(5)
    proc = ForcedTree(len(prompt(0).ids), 3, [6, 2, 9])
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(max_pages=3), [proc])
    steps = []
    orig = eng._step

    def step():
        steps.append(len(eng.active))
        orig()
    eng._step = step
    return {r.name: r for r in eng.run(items)}, steps


def test_engine_steps_while_the_next_item_is_pending_and_pages_are_unchanged():
    items = [(f"p{i}", prompt(i), None) for i in range(4)]
    plain, _ = _forced_run(items)

    asked = []

    def slow():  # a page, then None (not ready) five times before each further page; None first too
        for k, it in enumerate(items):
            for _ in range(5 if k else 2):
                asked.append(len(asked))
                yield None
            yield it
    pending, steps = _forced_run(slow())
    assert sorted(pending) == sorted(plain)
    for name, r in plain.items():
        assert pending[name].graph.flatten() == r.graph.flatten() and pending[name].steps == r.steps
    # between the first page and the second, the engine stepped the first page alone
    assert steps[:5] == [1] * 5 and len(asked) == 2 + 3 * 5


# --- the draft queue ---------------------------------------------------------------------------

class Counted:
    """A one-shot sample iterator that counts what was read."""

    def __init__(self, samples):
        self.samples, self.read = list(samples), 0

    def __iter__(self):
        for s in self.samples:
            self.read += 1
            yield s


def _pipeline_available():
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
        pytest.importorskip(mod)


SEEDS = (1_000_003, 1_000_013, 1_000_030)  # held-out pages: tables, a figure, two columns


def test_worker_drafts_equal_in_process_drafts_byte_for_byte(tmp_path, pipeline_drafters):
    _pipeline_available()
    from treedec.io.omnidocbench import page_to_omnidocbench
    from treedec.ocr import draft_pages
    from treedec.ocr.pool import DraftQueue

    samples = [generate_page(s, SynthConfig()) for s in SEEDS]
    samples.insert(1, generate_page(7, SynthConfig(), render=False))  # no image: passed on, not dropped
    here = draft_pages(samples[:1] + samples[2:], cache_dir=tmp_path / "here", progress=False,
                       drafters=pipeline_drafters)
    src = Counted(samples)
    queue = DraftQueue(src, workers=2, ahead=2, cache_dir=tmp_path / "pool", drafters=pipeline_drafters)
    assert src.read == 2  # back-pressure: no more than `ahead` read before anything is taken
    first = queue.take(wait=0.0)
    assert first is None and len(queue) == 2  # just submitted: a worker is still drafting it
    got = list(queue)
    assert [s.name for s, _, _ in got] == [s.name for s in samples] and src.read == len(samples)
    assert got[1][1] is None
    for s, page, cost in got:
        if page is None:
            continue
        assert json.dumps(page_to_omnidocbench(page)) == json.dumps(page_to_omnidocbench(here[s.name]))
        assert cost.cpu_s > 0 and cost.wall_s > 0 and not cost.cached
    here_files = {p.name: p.read_bytes() for p in (tmp_path / "here").glob("*.json")}
    pool_files = {p.name: p.read_bytes() for p in (tmp_path / "pool").glob("*.json")}
    assert len(here_files) == 3 and here_files == pool_files
    again = list(DraftQueue(samples, workers=2, ahead=2, cache_dir=tmp_path / "pool",
                            drafters=pipeline_drafters))  # all cached now
    assert all(c.cached for _, p, c in again if p is not None)
    assert [p for _, p, _ in again] == [p for _, p, _ in got]


# --- padoc_hsd: drafter workers beside decoding -------------------------------------------------

def test_padoc_hsd_with_drafter_workers_parses_the_pages_of_drafting_first(pipeline_drafters):
    """Same pages, token for token, same steps and stage-1 figures, drafts used (accepted and
    rejected), each page's drafting cost reported; the shipped model, pipeline drafts (the module's
    drafters: in process for drafting first, its pool of two workers beside decoding)."""
    _pipeline_available()
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm
    from treedec.models.vlm import SHIPPED
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.strategies.base import build_strategy

    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped model in this checkout")
    torch.set_num_threads(1)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    samples = list(open_dataset({"name": "synth", "pages": 3, "seed": 1_000_100}, model_pages=vlm.pages))
    ecfg = EngineConfig(max_pages=2, max_new_tokens=512)
    runs = {}
    for w in (0, 2):
        strategy = build_strategy({"name": "padoc_hsd", "draft_workers": w}, vlm.tokenizer)
        strategy = shared_drafters(strategy, pipeline_drafters)
        runs[w] = run_strategy(EmbeddedRuntime(ecfg), vlm, strategy, samples, progress=False, warmup=False)
    first, beside = runs[0], runs[2]
    assert [r.name for r in beside.records] == [s.name for s in samples]
    for a, b in zip(first.records, beside.records):
        assert vlm.tokenizer.encode(a.text) == vlm.tokenizer.encode(b.text)
        assert (a.steps, a.drafted, a.accepted) == (b.steps, b.drafted, b.accepted)
        assert {k: a.extra[k] for k in ("stage1_steps", "stage1_crops")} == \
               {k: b.extra[k] for k in ("stage1_steps", "stage1_crops")}
        assert b.extra["draft_cpu_s"] > 0 and b.extra["draft_wall_s"] > 0
    assert sum(r.accepted for r in beside.records) > 0
    assert sum(r.drafted - r.accepted for r in beside.records) > 0
    assert beside.phases["draft"] > 0 and beside.phases["stage1"] > 0
    assert abs(sum(beside.phases.values()) - beside.wall_s) < 1e-3 * beside.wall_s + 1e-3
    # latency: stage 1 is a run of its own (treedec.run.stages), drafting beside it, the page decode
    # after it, so every page waits for both; no page waits longer than the run lasted (without
    # stage 1, beside decoding a page waits for its own draft only: tests/test_hsd.py)
    from treedec.results.speed import page_latencies

    for run in (first, beside):
        assert run.before_s >= 0.9 * (run.phases["draft"] + run.phases["stage1"])
        e2e, dec = page_latencies(run)
        assert len(e2e) == len(samples) and max(e2e) <= run.wall_s + 1e-3
        assert all(e > d > 0 for e, d in zip(e2e, dec))


def test_drafter_options_and_workers_from_the_strategy_config():
    from treedec.errors import UserError
    from treedec.ocr.pipeline import DRAFTER_VERSION, PipelineConfig
    from treedec.strategies.base import build_strategy

    s = build_strategy({"name": "padoc_hsd", "ocr": {"rec_width": 96}, "draft_workers": 2}, TOK)
    assert s.before.ocr == PipelineConfig(rec_width=96) and s.before.workers == 2 and s.before.beside
    assert build_strategy({"name": "hsd"}, TOK).before.ocr is None
    assert not build_strategy({"name": "hsd"}, TOK).before.beside  # drafting first, as before
    # every option is in the tag (cache keys, drafts' info), and so is the drafter's version
    tags = {PipelineConfig().tag(), PipelineConfig(rec_width=96).tag(), PipelineConfig(det_side=512).tag(),
            PipelineConfig(det_down=not PipelineConfig.det_down).tag(), PipelineConfig(int8_rec=False).tag(),
            PipelineConfig(int8_det=False).tag(), PipelineConfig(rec_squeeze=1.0).tag()}
    assert len(tags) == 7 and all(t.startswith(f"{DRAFTER_VERSION}:") for t in tags)
    with pytest.raises(UserError, match="strategy.ocr"):
        build_strategy({"name": "padoc_hsd", "ocr": {"rec_wdth": 48}}, TOK)
    with pytest.raises(UserError, match="draft_workers"):
        build_strategy({"name": "padoc_hsd", "draft_workers": -1}, TOK)
