"""HSD: page drafts propose the true continuation; HSD strategies are lossless end to end."""
import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.drafters.page_drafts import PageDraftDrafter
from treedec.engine.engine import EngineConfig
from treedec.models.vlm import VLM, VLMSpec
from treedec.runner import parse_pages
from treedec.strategies.base import STRATEGIES, build_strategy

from engine_helpers import TOK


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
    from treedec.page import Block, Page
    from treedec.serialize import box_to_text
    from treedec.strategies.hsd import on_grid

    draft = Page(width=256, height=256, blocks=[Block("text_block", (19.5, 17.0, 238.2, 93.4), "a"),
                                                Block("title", (2.0, 243.0, 60.0, 255.0), "b")])
    snapped = on_grid(draft, 16)
    assert [b.bbox for b in snapped.blocks] == [(16.0, 16.0, 240.0, 96.0), (0.0, 240.0, 64.0, 256.0)]
    assert draft.blocks[0].bbox == (19.5, 17.0, 238.2, 93.4)  # a copy: the cached draft is untouched
    assert box_to_text(snapped.blocks[0].bbox, 256, 256) == "[62,62,938,375]"


SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


@pytest.mark.parametrize("name, base, options", [("hsd", "sequential", {}), ("padoc_hsd", "padoc", {}),
                                                 ("hsd", "sequential", {"layout": "ngram"}),
                                                 ("padoc_hsd", "padoc", {"layout": "ngram"})])
def test_hsd_output_equals_its_base(name, base, options):
    torch.manual_seed(0)
    vlm = VLM.tiny(SPEC, seed=5)
    cfg = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
    samples = [generate_page(s, cfg) for s in range(2)]
    ecfg = EngineConfig(max_new_tokens=24)
    plain = parse_pages(vlm, build_strategy({"name": base}, vlm.tokenizer), samples, ecfg, progress=False)
    spec = parse_pages(vlm, build_strategy({"name": name, "drafts": "oracle", **options}, vlm.tokenizer), samples, ecfg,
                       progress=False)
    for a, b in zip(plain.records, spec.records):
        assert a.text == b.text
        assert b.extra["stage1_crops"] > 0 and b.steps >= b.extra["stage1_steps"] > 0


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
