"""`crops`, the decoupled two-stage parse (MinerU2.5 / PaddleOCR-VL): the layout pass is
PaDoc's layout stream, every region is read from its own crop, the crops run batched (a
stage of their own, `treedec.run.stages`), a page's critical path is its layout's steps plus its
longest crop's, and no page is dropped. On runtime=vllm: tests/test_vllm_backend.py."""
import json

import pytest
import torch

from treedec.models.vlm import SHIPPED
from treedec.results.depth import page_depth
from treedec.strategies.base import STRATEGIES

from engine_helpers import TOK
from test_run import PAGES, _run

PAGES_N = 4


def test_oracle_depth_is_the_layout_then_the_longest_region(synth_pages):
    crops, padoc = STRATEGIES.get("crops")(TOK), STRATEGIES.get("padoc")(TOK)
    deeper = 0
    for page in synth_pages[:30]:
        g = crops.target(page, TOK, [TOK.image_id])
        layout = g[0].generated
        read = [b for b in page.reading_order() if b.category != "figure"]
        assert len(g.streams) == 1 + len(read)
        assert g.critical_path() == layout + max((TOK.count(b.content) + 1 for b in read), default=0)
        d_crops, d_padoc = page_depth(page, crops)["fork_depth"], page_depth(page, padoc)["fork_depth"]
        assert d_crops >= d_padoc  # PaDoc's branches start at their own <FORK>, the crops after the whole layout
        deeper += d_crops > d_padoc
    assert deeper > 0


def test_run_on_a_tiny_random_model_writes_every_page(tmp_path):
    """`run strategy=crops` end to end on random weights: every page written with its figures."""
    r = _run("strategy=crops", "data.pages=3", *PAGES, f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    figures = [json.loads((tmp_path / "pages" / f"synth_{1_000_000 + i}.json").read_text()) for i in range(3)]
    assert len(list((tmp_path / "pages").glob("*.md"))) == 3
    assert all(f["steps"] >= f["root_steps"] > 0 for f in figures)
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["strategy"] == "crops" and s["pages"] == 3 and s["median_steps"] > 0 and s["text_edit"] is not None


def test_every_fork_is_read_and_steps_are_the_layouts_plus_the_longest_crop():
    """On a forced model (every token the ground truth's: the layout closes its regions) every
    region that holds content is read from its crop, a figure's branch stays empty, steps =
    the layout's + the longest crop's, and the run's forward passes count both stages' runs."""
    from treedec.data import SynthDataset
    from treedec.models.forced import ForcedModel
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedConfig, EmbeddedRuntime

    vlm = ForcedModel("1m", vision_tokens=16)
    tok, crops = vlm.tokenizer, STRATEGIES.get("crops")(vlm.tokenizer)
    page = {"width": 128, "height": 128, "cell": [8, 8], "margin": 1, "kinds": {"text_block": 0.6, "figure": 0.4}}
    samples = list(SynthDataset(pages=4, seed=1_000_000, page=page))
    runtime = EmbeddedRuntime(EmbeddedConfig(max_pages=2, max_new_tokens=4000))
    res = run_strategy(runtime, vlm, crops, samples, progress=False, warmup=False)
    assert [r.name for r in res.records] == [s.name for s in samples]
    figures = 0
    for rec, s in zip(res.records, samples):
        g = rec.decoding.graph
        blocks = s.page.reading_order()
        kids = g.children(0)
        assert len(kids) == len(blocks) == g[0].tokens.count(tok.fork_id)
        read = [g[k].generated for k, b in zip(kids, blocks) if b.category != "figure"]
        assert all(n > 0 for n in read)
        assert all(g[k].generated == 0 for k, b in zip(kids, blocks) if b.category == "figure")
        figures += sum(b.category == "figure" for b in blocks)
        assert rec.steps == len(rec.timeline) == rec.root_steps + max(read, default=0)
        assert sum(map(len, rec.timeline)) == rec.generated  # one token per stream and step: no drafting
        assert crops.flat_text(g).count("<CHILD>") == len(blocks)
        assert [b.content for b in rec.page.reading_order()] == [b.content for b in blocks]  # forced: the truth
    assert figures > 0
    # a page takes part in at most every forward of its run: the crops' run's forwards are counted
    assert res.forward_passes >= max(r.steps for r in res.records) > max(r.root_steps for r in res.records)
    assert abs(sum(res.phases.values()) - res.wall_s) < 1e-6 + 1e-3 * res.wall_s


@pytest.fixture(scope="module")
def shipped():
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped model in this checkout")
    from treedec.data import SynthDataset
    from treedec.engine.engine import EngineConfig
    from treedec.models.vlm import VLM
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime

    torch.set_num_threads(1)
    vlm = VLM.load(SHIPPED)
    samples = list(SynthDataset(pages=PAGES_N, seed=1_000_000, page=vlm.pages))
    cfg = EngineConfig(max_pages=PAGES_N, max_new_tokens=512)
    runs = {n: run_strategy(EmbeddedRuntime(cfg), vlm, STRATEGIES.get(n)(vlm.tokenizer), samples, progress=False,
                            warmup=False) for n in ("crops", "padoc")}
    return vlm, samples, cfg, runs


def test_the_layout_pass_is_padocs_layout_stream(shipped):
    vlm, samples, _, runs = shipped
    assert [r.name for r in runs["crops"].records] == [s.name for s in samples]  # every page, in input order
    tok = vlm.tokenizer
    for c, p in zip(runs["crops"].records, runs["padoc"].records):
        assert c.root_steps == p.root_steps
        layout = [line.split("<CHILD>")[0] for line in c.text.split("<BLOCK>")]
        assert layout == [line.split("<CHILD>")[0] for line in p.text.split("<BLOCK>")]
        assert c.streams == p.streams == 1 + c.text.count("<BLOCK>")
        assert tok.eos_id not in tok.encode(c.text)[:-1]  # the crops' <eos> dropped when spliced


def test_each_crop_reads_as_it_does_alone_and_steps_are_layout_plus_longest(shipped):
    """Batched crops equal each crop decoded alone (token for token), and a page's steps are
    its layout's plus its longest crop's (they run in parallel)."""
    from treedec.engine.engine import Engine
    from treedec.strategies.crops import ReadCrops

    vlm, samples, cfg, runs = shipped
    step = ReadCrops(vlm.tokenizer)
    layouts = {r.name: r for r in Engine(vlm.adapter(), STRATEGIES.get("crops")(vlm.tokenizer), cfg).run(
        [(s.name, vlm.prompt(s.image, "tree"), s) for s in samples])}
    read = 0
    for rec in runs["crops"].records:
        regions = step.regions(vlm, layouts[rec.name], None)
        assert regions, rec.name
        alone = [next(Engine(vlm.adapter(), step.reader(vlm), cfg).run([(s.name, vlm.prompt(s.image, "crop"), s)]))
                 for _, s, _ in regions]
        texts = [vlm.tokenizer.decode(a.graph[0].tokens[a.graph[0].prompt_len:]).removesuffix("<eos>") for a in alone]
        blocks = rec.text.removesuffix("<eos>").split("<BLOCK>")[1:]
        assert [b.split("<CHILD>", 1)[1] for b in blocks if not b.startswith("<|figure|>")] == texts
        assert rec.steps == layouts[rec.name].steps + max(a.steps for a in alone)
        assert rec.root_steps == layouts[rec.name].steps
        read += len(alone)
    assert read > PAGES_N


def test_the_runs_forward_passes_count_the_crops(shipped):
    """A page takes part in at most every forward of its run, so the run's `forward_passes`
    reach every page's steps (layout + longest crop): the crops' engines are counted, not
    only the layout pass's (which falls short of a page with a crop)."""
    from treedec.engine.engine import Engine

    vlm, samples, cfg, runs = shipped
    layout = Engine(vlm.adapter(), STRATEGIES.get("crops")(vlm.tokenizer), cfg)
    list(layout.run([(s.name, vlm.prompt(s.image, "tree"), s) for s in samples]))
    crops = runs["crops"]
    assert max(r.steps for r in crops.records) > layout.forward_passes  # the layout pass alone falls short
    assert crops.forward_passes >= max(r.steps for r in crops.records)
    assert runs["padoc"].forward_passes >= max(r.steps for r in runs["padoc"].records)


def test_quality_is_measured_as_for_the_others(shipped):
    from treedec.results.evaluate import evaluate_pages

    _, samples, _, runs = shipped
    ev = {n: evaluate_pages({r.name: r.page for r in res.records}, [s.page for s in samples]) for n, res in runs.items()}
    assert ev["crops"]["layout_f1"] == ev["padoc"]["layout_f1"]  # the same layout
    assert ev["crops"]["text_edit"] < 0.4, ev["crops"]["text_edit"]


def test_crops_is_refused_as_a_base_in_one_line():
    from treedec.errors import UserError
    from treedec.strategies.base import build_strategy

    with pytest.raises(UserError, match="strategy.base") as e:
        build_strategy({"name": "hsd", "base": "crops"}, TOK)
    assert "\n" not in str(e.value)
