"""Greedy speculative decoding is lossless: with any draft trees (junk, perfect, several
branches) the engine's output equals its output without drafts, token for token."""
import random
from dataclasses import replace

import pytest

from treedec.engine.draft import DraftTree, accept_greedy
from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import CausalLMAdapter
from treedec.strategies.base import STRATEGIES

from engine_helpers import TOK, ForcedTree, OneAtATime, prompt, tiny_llama


ALPHABET = [TOK.vocab[c] for c in "0123456789abcdefghij"]  # what `ForcedTree` lets a model choose from


class ReferenceDrafter(OneAtATime):
    """Drafts from a reference run's streams: `quality` = 'perfect' (the true next
    tokens), 'junk' (three chains of random tokens of the alphabet the streams are written
    in, so right now and then by chance), or 'tree' (the truth among junk siblings, at every depth)."""

    def __init__(self, reference, quality: str, k: int = 5, seed: int = 0):
        self.ref, self.quality, self.k = reference, quality, k
        self.rng = random.Random(seed)
        self.depth = k

    def propose(self, graph, sid, sample, state=None):
        s = graph[sid]
        truth = self.ref[sid].tokens[len(s.tokens): len(s.tokens) + self.k] if sid < len(self.ref) else []
        junk = lambda: self.rng.choice(ALPHABET)  # noqa: E731
        if self.quality == "junk":  # three random chains side by side
            chains = [DraftTree.chain([junk() for _ in range(self.k)]) for _ in range(3)]
            return DraftTree([t for c in chains for t in c.tokens],
                             [p + i * self.k if p >= 0 else -1 for i, c in enumerate(chains) for p in c.parents])
        if self.quality == "perfect":  # the true tokens, then one wrong (cut where the stream ends)
            return DraftTree.chain(truth + [(truth[-1] + 1) % len(TOK)]) if truth else None
        tokens, parents, parent = [], [], -1
        for t in truth:  # at each depth: two junk siblings, then the true token, which continues
            for _ in range(2):
                tokens.append(junk())
                parents.append(parent)
            tokens.append(t)
            parents.append(parent)
            parent = len(tokens) - 1
        return DraftTree(tokens, parents) if tokens else None


def _decode(model, strategy, prompts, procs, drafter=None, **cfg):
    strategy = replace(strategy, drafter=drafter)
    eng = Engine(CausalLMAdapter(model), strategy, EngineConfig(**cfg), procs)
    res = {r.name: r for r in eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)])}
    assert eng.arena.used == 0
    return [res[f"p{i}"] for i in range(len(prompts))]


@pytest.mark.parametrize("name", ["sequential", "padoc"])
@pytest.mark.parametrize("quality", ["junk", "perfect", "tree"])
def test_speculation_is_lossless(name, quality):
    model = tiny_llama(11)
    prompts = [prompt(s) for s in range(3)]
    fork = name == "padoc"
    procs = [ForcedTree(len(prompts[0].ids), 3, [9, 4, 12], fork=fork)]
    plain = _decode(model, STRATEGIES.get(name)(TOK), prompts, procs, max_pages=2)
    for ref in plain:
        drafter = ReferenceDrafter(ref.graph.streams, quality)
        [spec] = _decode(model, STRATEGIES.get(name)(TOK), [prompts[int(ref.name[1:])]], procs, drafter)
        assert [s.tokens for s in spec.graph.streams] == [s.tokens for s in ref.graph.streams]
        assert spec.accepted > 0 and spec.drafted > spec.accepted  # drafts accepted and rejected
        if quality == "junk":  # a junk token is accepted only where it happens to be right
            assert spec.steps <= ref.steps and spec.accepted <= 0.2 * spec.drafted
        else:
            assert spec.steps < ref.steps


def test_unconstrained_model_with_junk_drafts_matches():
    model = tiny_llama(12)
    p = prompt(4)
    [ref] = _decode(model, STRATEGIES.get("sequential")(TOK), [p], [], max_new_tokens=30)
    [spec] = _decode(model, STRATEGIES.get("sequential")(TOK), [p], [], ReferenceDrafter(ref.graph.streams, "tree"),
                     max_new_tokens=30)
    assert spec.graph[0].tokens == ref.graph[0].tokens
    assert spec.accepted > 0 and spec.drafted > spec.accepted


def test_accept_greedy_walks_the_agreeing_path():
    tree = DraftTree([5, 6, 7, 8], [-1, -1, 0, 2])  # 5 -> 7 -> 8 ; 6
    assert accept_greedy(tree, [5, 7, 0, 8, 4]).tokens == [5, 7, 8, 4]  # 5 -> 7 -> 8 accepted, bonus 4 after node 3
    assert accept_greedy(tree, [6, 1, 2, 3, 4]).tokens == [6, 2]  # second root child, then its bonus
    assert accept_greedy(tree, [1, 2, 3, 4, 5]).tokens == [1]  # nothing accepted: the bonus only
    with pytest.raises(ValueError):
        DraftTree([1, 2], [1, -1])


def test_relaxed_acceptance_takes_likely_draft_tokens():
    import torch

    from treedec.engine.draft import relaxed

    tree = DraftTree([5, 6], [-1, 0])
    logits = torch.full((3, 10), -10.0)
    logits[0, 4], logits[0, 5] = 2.0, 1.5  # the model prefers 4 but gives 5 a fair share
    logits[1, 6] = 3.0
    logits[2, 7] = 3.0
    choices = [4, 6, 7]
    assert accept_greedy(tree, choices).tokens == [4]  # exact: the draft's 5 is rejected
    assert relaxed(0.3)(tree, choices, logits).tokens == [5, 6, 7]  # p(5) ~ 0.38 >= 0.3
    assert relaxed(0.5)(tree, choices, logits).tokens == [4]
