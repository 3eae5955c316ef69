"""HSD: page drafts propose the true continuation; HSD strategies are lossless end to end."""
import copy

import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.drafters.page_drafts import PageDraftDrafter
from treedec.engine.engine import EngineConfig
from treedec.formats.contract import parse_flat
from treedec.models.vlm import VLM, VLMSpec
from treedec.run.stages import drafts_ahead, run_strategy
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import STRATEGIES, build_strategy

from conftest import shared_drafters
from engine_helpers import TOK, ForcedTree
from lossless_helpers import corrupted, decode


@pytest.mark.parametrize("name, form, layout", [("sequential", "flat", "ngram"), ("padoc", "tree", "ngram"),
                                                ("sequential", "flat", "lines"), ("padoc", "tree", "lines")])
def test_page_drafts_propose_the_truth(name, form, layout, synth_pages):
    """Drafting a page from itself: at every point of every stream the draft's first path
    continues with the true next tokens."""
    strategy = STRATEGIES.get(name)(TOK)
    drafter = PageDraftDrafter(TOK, form, layout=layout)
    for page in synth_pages[:8]:
        sample = type("S", (), {"name": "p"})()
        drafter.pages, drafter._seqs = {"p": page}, {}
        truth = strategy.target(page, TOK, [TOK.image_id])
        for s in truth.streams:
            for cut in range(s.prompt_len + 1, len(s.tokens), 7):  # replay the stream up to `cut`
                g = strategy.target(page, TOK, [TOK.image_id])
                g[s.id].tokens = g[s.id].tokens[:cut]
                tree = drafter.propose(g, s.id, sample)
                assert tree is not None, (s.label, cut)
                nxt = s.tokens[cut]
                assert nxt in [tree.tokens[i] for i, p in enumerate(tree.parents) if p == -1], (s.label, cut)


def test_alternative_drafts_propose_every_candidate():
    """Stage 2 with `stage2_drafts=both`: a junk draft beside the true one costs tree nodes,
    never the true continuation; candidates that agree share their nodes."""
    from treedec.data.synth import SynthConfig, generate_page
    from treedec.drafters.ngram import NgramMatcher, prefix_tree
    from treedec.drafters.page_drafts import continue_draft

    tree = prefix_tree([[1, 2, 3], [1, 2, 4], [1, 2, 3]])
    assert tree.tokens == [1, 2, 3, 4] and tree.parents == [-1, 0, 1, 1]
    assert prefix_tree([[]]) is None and len(prefix_tree([[1, 2], [3, 4]], max_nodes=3)) == 3
    m = NgramMatcher()
    early = continue_draft([7], [[7, 8, 9], [7, 5], [6, 8]], m)  # before a match window: drafts that start alike
    assert early.tokens == [8, 9, 5] and early.parents == [-1, 0, -1]
    page = generate_page(7, SynthConfig()).page
    junk = generate_page(8, SynthConfig()).page
    strategy = STRATEGIES.get("padoc")(TOK)
    drafter = PageDraftDrafter(TOK, "tree")
    drafter.pages = {"p": [junk, page]}
    truth = strategy.target(page, TOK, [TOK.image_id])
    sample = type("S", (), {"name": "p"})()
    for s in truth.streams:
        for cut in range(s.prompt_len + 1, len(s.tokens), 5):
            g = strategy.target(page, TOK, [TOK.image_id])
            g[s.id].tokens = g[s.id].tokens[:cut]
            tree = drafter.propose(g, s.id, sample)
            assert tree is not None and s.tokens[cut] in [t for t, p in zip(tree.tokens, tree.parents) if p == -1]


def test_pipeline_boxes_move_to_the_models_grid():
    """`snap`: a drafted box tight on the ink drafts the box the model writes (cell lines)."""
    from treedec.formats.contract import box_to_text
    from treedec.page import Block, Page
    from treedec.strategies.hsd import on_grid

    draft = Page(width=256, height=256, blocks=[Block("text_block", (19.5, 17.0, 238.2, 93.4), "a"),
                                                Block("title", (2.0, 243.0, 60.0, 255.0), "b")])
    snapped = on_grid(draft, 16)
    assert [b.bbox for b in snapped.blocks] == [(16.0, 16.0, 240.0, 96.0), (0.0, 240.0, 64.0, 256.0)]
    assert draft.blocks[0].bbox == (19.5, 17.0, 238.2, 93.4)  # a copy: the cached draft is untouched
    assert box_to_text(snapped.blocks[0].bbox, 256, 256) == "[62,62,938,375]"


SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


BOXES = ["[62,62,938,312]", "[62,375,938,625]", "[62,688,938,938]"]  # a page of three text blocks


@pytest.mark.parametrize("name, base, options", [("hsd", "sequential", {}), ("padoc_hsd", "padoc", {}),
                                                 ("hsd", "sequential", {"layout": "ngram"}),
                                                 ("padoc_hsd", "padoc", {"layout": "ngram"})])
def test_hsd_output_equals_its_base(name, base, options):
    """Lossless and not vacuously: a random model made to write a page (`ForcedTree`: three
    text blocks with the boxes given, content the model's own choice among letters) gives the
    same token ids, every stream, with HSD's drafts as without; drafts were both accepted and
    rejected. The drafts (`drafts=oracle` reads the sample's page): the base run's own page
    with every 4th content character changed, never the page's ground truth; stage 1 decodes
    a crop of each of its blocks."""
    torch.manual_seed(0)
    vlm = VLM.tiny(SPEC, seed=5)
    tok = vlm.tokenizer
    cfg = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
    samples = [generate_page(s, cfg) for s in range(2)]
    ecfg = EngineConfig(max_new_tokens=160)
    plain_strategy = build_strategy({"name": base}, tok)
    proc = ForcedTree(len(vlm.prompt(samples[0].image, plain_strategy.mode).ids), 3, [14, 9, 11],
                      fork=base == "padoc", boxes=BOXES, tok=tok)
    plain = decode(vlm, plain_strategy, samples, ecfg, [proc])
    drafted = [copy.copy(s) for s in samples]
    for s in drafted:
        own = parse_flat(plain_strategy.flat_text(plain[s.name].graph), *s.image.size).page
        assert len(own.blocks) == 3 and all(b.content for b in own.blocks)
        s.page = corrupted(own)
    strategy = build_strategy({"name": name, "drafts": "oracle", **options}, tok)
    strategy, before = drafts_ahead(EmbeddedRuntime(EngineConfig(max_new_tokens=24)), vlm, strategy, drafted)  # stage 1
    spec = decode(vlm, strategy, drafted, ecfg, [proc])
    for n, r in plain.items():
        assert [s.tokens for s in spec[n].graph.streams] == [s.tokens for s in r.graph.streams], n
        assert before[n]["stage1_crops"] == 3 and before[n]["stage1_steps"] > 0
        assert spec[n].steps < r.steps, (n, spec[n].steps, r.steps)
    accepted = sum(r.accepted for r in spec.values())
    assert accepted > 0 and sum(r.drafted for r in spec.values()) > accepted


def test_a_branch_without_its_region_matches_the_pages_other_regions():
    """A branch whose box no draft region overlaps (the pipeline merged blocks or put the box
    elsewhere) proposes nothing until it has written `w_min` tokens, then continues from
    wherever the page's drafts hold those tokens."""
    from treedec.page import Block, Page

    draft = Page(width=256, height=256, blocks=[Block("text_block", (16, 16, 240, 48), "alpha beta gamma delta")])
    truth = Page(width=256, height=256, blocks=[Block("title", (16, 200, 240, 216), "gamma delta")])
    strategy = STRATEGIES.get("padoc")(TOK)
    drafter = PageDraftDrafter(TOK, "tree")
    drafter.pages = {"p": draft}
    sample = type("S", (), {"name": "p"})()
    g = strategy.target(truth, TOK, [TOK.image_id])
    branch = next(s for s in g.streams if s.parent is not None)
    full = list(branch.tokens)
    branch.tokens = full[:2]  # <CHILD> g
    assert drafter.propose(g, branch.id, sample) is None
    branch.tokens = full[:4]  # <CHILD> g a m
    tree = drafter.propose(g, branch.id, sample)
    assert tree is not None and TOK.decode(tree.tokens[:6]) == "ma del"


@pytest.fixture(scope="module")
def shipped_page():
    """The shipped model and one held-out page with four draft regions (pipeline drafts)."""
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
        pytest.importorskip(mod)
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm
    from treedec.models.vlm import SHIPPED

    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped model in this checkout")
    torch.set_num_threads(1)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    return vlm, list(open_dataset({"name": "synth", "pages": 1, "seed": 1_000_003}, model_pages=vlm.pages))


@pytest.mark.parametrize("name", ["hsd", "padoc_hsd"])
@pytest.mark.parametrize("workers", [0, 1])
def test_stage1_forwards_count_in_the_runs_forward_passes(shipped_page, pipeline_drafters, name, workers):
    """HSD stage 1 decodes its crops on the run's own runtime, so their forwards are the run's.
    An engine run's forwards: one prefill per admitted page, then one per step, each page in
    every step until it ends (its `steps`: its prefill and those steps). On one page, its
    crops all admitted at once (C of them, fewer than max_pages), stage 1 takes C + its
    longest crop's steps - 1 forwards and stage 2 the page's own steps after stage 1; the
    page's `steps` add the two stages' (stage1_steps + stage 2's), so the run's forward_passes
    = steps + C - 1, drafted beside decoding (draft_workers=1) or before. Without stage 1:
    the page's steps. (Before this change stage 1's forwards were left out: steps - stage1_steps.)"""
    from treedec.runtimes.embedded import EmbeddedRuntime

    vlm, samples = shipped_page
    runs = {stage1: run_strategy(
        EmbeddedRuntime(EngineConfig(max_pages=64, max_new_tokens=512)), vlm,
        shared_drafters(build_strategy({"name": name, "stage1": stage1, "draft_workers": workers}, vlm.tokenizer),
                        pipeline_drafters), samples,
        progress=False, warmup=False) for stage1 in (True, False)}
    [rec] = runs[True].records
    crops, s1 = rec.extra["stage1_crops"], rec.extra["stage1_steps"]
    assert crops >= 2 and s1 > 0 and rec.accepted > 0
    assert runs[True].forward_passes == rec.steps + crops - 1, (runs[True].forward_passes, rec.steps, s1, crops)
    [plain] = runs[False].records
    assert plain.extra["stage1_crops"] == 0 and runs[False].forward_passes == plain.steps
    for run in runs.values():
        assert abs(sum(run.phases.values()) - run.wall_s) < 1e-3 * run.wall_s + 1e-6
    if workers:  # drafted beside the page decode (no stage 1): the page waited for its own draft only
        assert runs[False].before_s < 0.1 * runs[False].phases["draft"]


def test_progress_bars_count_crops_in_stage1_and_stay_out_of_the_warm_up(shipped_page, pipeline_drafters, capsys):
    """HSD's stage-1 bar counts crops, not pages; the untimed warm-up (one page, the whole
    strategy) shows no bar of its own: no stray "drafting 1/1"."""
    from treedec.runtimes.embedded import EmbeddedRuntime

    vlm, samples = shipped_page
    two = samples + [copy.copy(samples[0])]
    two[1].name = "again"
    hsd = shared_drafters(build_strategy({"name": "hsd"}, vlm.tokenizer), pipeline_drafters)
    run_strategy(EmbeddedRuntime(EngineConfig(max_pages=64, max_new_tokens=512)), vlm, hsd, two, progress=True,
                 warmup=True)
    err = capsys.readouterr().err
    assert "crop/s" in err or "s/crop" in err, err[-2000:]
    assert "drafting: 100%" in err and "1/1" not in err, err[-2000:]
