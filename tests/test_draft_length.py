"""Adaptive draft length (treedec/engine/draft_length.py): the cap rule, tree cutting, and
that the engine's output does not change with it (exact verification), while it proposes
fewer tokens when drafts fail."""
import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.draft import DraftTree, Verdict
from treedec.engine.draft_length import AdaptiveLength, cut
from treedec.engine.engine import EngineConfig
from treedec.graph import DecodingGraph
from treedec.models.vlm import VLM, VLMSpec
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy

from engine_helpers import OneAtATime


def test_cut_keeps_nodes_within_depth_and_their_parents():
    #      root -> 0 -> 1 -> 2
    #           -> 3 -> 4
    tree = DraftTree([10, 11, 12, 20, 21], [-1, 0, 1, -1, 3])
    small = cut(tree, 2)
    assert small.tokens == [10, 11, 20, 21] and small.parents == [-1, 0, -1, 2]
    assert cut(tree, 3) is tree
    assert cut(DraftTree.chain([1, 2, 3]), 1).tokens == [1]


class _Fixed:
    trees, needs_hidden, pages_ahead, depth, drafts_in_forward = True, False, False, 20, False

    def __init__(self, tree):
        self.tree = tree

    def for_run(self, vlm):
        return self

    def propose_many(self, requests):
        return [self.tree for _ in requests]

    def observe(self, graph, sid, sample, tree, verdict):
        pass


def test_cap_doubles_after_full_acceptance_and_drops_after_a_rejection():
    g = DecodingGraph()
    g.root([1, 2, 3])
    d = AdaptiveLength(_Fixed(DraftTree.chain(list(range(20)))), limit=8)
    assert len(d.propose(g, 0, None)) == 8  # starts at the limit
    d.observe(g, 0, None, d.propose(g, 0, None), Verdict([0, 1], [0, 1, 5]))  # 2 of 8 accepted
    assert len(d.propose(g, 0, None)) == 3
    d.observe(g, 0, None, d.propose(g, 0, None), Verdict([], [7]))  # none accepted
    assert len(d.propose(g, 0, None)) == 1
    for want in (2, 4, 8, 8):  # whole drafts accepted: doubles up to the limit
        tree = d.propose(g, 0, None)
        d.observe(g, 0, None, tree, Verdict(list(range(len(tree))), tree.tokens + [0]))
        assert len(d.propose(g, 0, None)) == want
    other = DecodingGraph()
    other.root([1])
    assert len(d.propose(other, 0, None)) == 8  # another page starts afresh


SPEC = VLMSpec(image_size=128, vision_hidden=64, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


class _OwnOutputCorrupted(OneAtATime):
    """Drafts the model's own greedy continuation (from a plain run), with every draft's
    token `bad` changed: each verdict accepts `bad` tokens."""

    def __init__(self, refs: dict, vocab: int, bad: int = 3):
        self.refs, self.vocab, self.bad = refs, vocab, bad

    def propose(self, graph, sid, sample, state=None):
        s = graph[sid]
        own, ref = s.tokens[s.prompt_len:], self.refs[sample.name]
        if own != ref[:len(own)] or len(own) >= len(ref):
            return None
        chain = ref[len(own):len(own) + 15]
        return DraftTree.chain([(t + 1) % self.vocab if i == self.bad else t for i, t in enumerate(chain)])


def test_adaptive_length_same_pages_same_steps_fewer_draft_tokens():
    """Drafts that always fail at their 4th token: with the adaptive cap the engine gives
    the same pages in the same steps, proposing a fraction of the tokens."""
    from treedec.strategies.sequential import flat_target
    from treedec.strategies.base import Strategy

    torch.manual_seed(0)
    vlm = VLM.tiny(SPEC, seed=5)
    tok = vlm.tokenizer
    cfg = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)
    samples = [generate_page(s, cfg) for s in range(3)]
    ecfg = EngineConfig(max_pages=3, max_new_tokens=40)
    refs: dict = {}

    class Recorder(OneAtATime):  # no drafts; notes each page's generated tokens
        def propose(self, graph, sid, sample, state=None):
            s = graph[sid]
            refs[sample.name] = s.tokens[s.prompt_len:]

    plain = EmbeddedRuntime(ecfg).run(vlm, Strategy("plain", "flat", tok, flat_target, drafter=Recorder()), samples,
                                      progress=False)
    assert [r.text for r in plain.records] == [r.text for r in EmbeddedRuntime(ecfg).run(
        vlm, build_strategy({"name": "sequential"}, tok), samples, progress=False).records]
    runs = {}
    for adaptive in (False, True):
        drafter = _OwnOutputCorrupted(refs, len(tok))
        strategy = Strategy("spec", "flat", tok, flat_target, drafter=AdaptiveLength(drafter, 15) if adaptive else drafter)
        runs[adaptive] = EmbeddedRuntime(ecfg).run(vlm, strategy, samples, progress=False)
    for res in runs.values():
        assert [r.text for r in res.records] == [r.text for r in plain.records]
        assert sum(r.accepted for r in res.records) > 0 and sum(r.drafted - r.accepted for r in res.records) > 0
    steps = {k: [r.steps for r in res.records] for k, res in runs.items()}
    drafted = {k: sum(r.drafted for r in res.records) for k, res in runs.items()}
    assert steps[True] == steps[False] and max(steps[True]) < max(r.steps for r in plain.records), steps
    assert 0 < drafted[True] < drafted[False] / 2, drafted


def test_bad_draft_len_is_a_user_error():
    from treedec.errors import UserError

    with pytest.raises(UserError, match="draft_len"):
        build_strategy({"name": "hsd", "draft_len": "sometimes"}, VLM.tiny(SPEC, seed=5).tokenizer)
