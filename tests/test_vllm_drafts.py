"""HSD on runtime=vllm: page drafts served as linear chains by treedec's `custom_class`
proposer (treedec/runtimes/vllm/drafts.py), verified by vLLM's greedy rejection sampler.

The matching and the store are tested without an engine. The engine tests decode the
fixture's pages (tests/assets/vllm_tiny) with `hsd` and `padoc_hsd` from `drafts=oracle`
where the "ground truth" is the model's own greedy output (from the embedded engine's
base strategy: the fixture is a tiny model, so only its own output makes drafts it
accepts), and from junk drafts; one vLLM engine (with the proposer) serves the module.
"""
import copy
import random
import types
from dataclasses import replace

import numpy as np
import pytest

from treedec.drafters.ngram import NgramMatcher
from treedec.errors import UserError
from treedec.run.stages.recording import run_with_ids
from treedec.runtimes.vllm.drafts import ENV_STORE, DraftIndex, DraftStore, PageDraftProposer

from test_vllm_backend import FIXTURE, MAX_NEW, _samples, _vlm, _vllm_or_skip, assert_same_ids


# ---------------------------------------------------------------------- no engine
def test_draft_index_matches_like_the_ngram_matcher():
    """The index finds what `NgramMatcher.matches` finds (same w growth), and proposes the
    continuation of one of those matches, at most k tokens."""
    rng = random.Random(0)
    for trial in range(300):
        drafts = [[rng.randrange(4) for _ in range(rng.randrange(0, 40))] for _ in range(rng.randrange(1, 5))]
        history = [rng.randrange(4) for _ in range(rng.randrange(0, 16))]
        w_min, w_max = rng.choice([(1, 4), (2, 5), (3, 10)])
        index = DraftIndex(drafts, w_min, w_max)
        want = NgramMatcher(w_min, w_max).matches(history, drafts)
        assert index.matches(history) == want, trial
        k = rng.randrange(1, 6)
        got = index.propose(history, k)
        options = [drafts[d][j:j + k] for d, j in want if j < len(drafts[d])]
        assert (got in options) if options else got == [], trial


def test_draft_index_prefers_the_draft_that_agrees_furthest_back():
    index = DraftIndex([[1, 2, 7, 8, 9, 5], [3, 4, 7, 8, 9, 6]], w_min=2, w_max=3)
    assert index.propose([4, 7, 8, 9], 4) == [6]  # both match [7, 8, 9]; the second agrees one token further
    assert index.propose([0, 7, 8, 9], 4) == [5]  # a tie: the first stored
    assert index.propose([9, 9], 4) == []


def _proposer(tmp_path, monkeypatch, k=4):
    store = DraftStore(tmp_path / "drafts.json")
    monkeypatch.setenv(ENV_STORE, str(store.path))
    cfg = types.SimpleNamespace(speculative_config=types.SimpleNamespace(num_speculative_tokens=k),
                                model_config=types.SimpleNamespace(max_model_len=64))
    return store, PageDraftProposer(cfg)


def _rows(*contexts, width=64):
    ids = np.zeros((len(contexts), width), dtype=np.int32)
    for i, c in enumerate(contexts):
        ids[i, :len(c)] = c
    return np.array([len(c) for c in contexts], dtype=np.int32), ids


def test_proposer_serves_the_store_and_follows_rewrites(tmp_path, monkeypatch):
    store, proposer = _proposer(tmp_path, monkeypatch)
    n, ids = _rows([5, 1, 2, 3], [5, 1, 2, 3], [9, 9, 9])
    assert proposer.propose([[3], [3], [9]], n, ids) == [[], [], []]  # no store file yet: no drafts
    proposer.load_model(object())  # vLLM's CPU runner calls it unconditionally
    store.write([[1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 9, 9, 9]], w_min=3, w_max=5)
    # a row with no new token this step (e.g. a prefill chunk) gets no draft; k caps the chain
    assert proposer.propose([[3], [], [9]], n, ids) == [[4, 5, 6, 7], [], []]
    store.write([[1, 2, 3, 6]], w_min=3, w_max=5)  # the next run's drafts: reloaded
    assert proposer.propose([[3]], *_rows([1, 2, 3])) == [[6]]
    store.clear()
    assert proposer.propose([[3]], *_rows([1, 2, 3])) == [[]]
    n, ids = _rows(list(range(60)) + [1, 2, 3])  # 63 tokens of max_model_len 64: one more at most
    store.write([[1, 2, 3, 4, 5]], w_min=3, w_max=5)
    assert proposer.propose([[3]], n, ids) == [[4]]


@pytest.mark.parametrize("params, cfg, words", [
    ({"name": "hsd", "relaxed_threshold": 0.3}, {}, "lossily"),
    ({"name": "padoc_hsd"}, {"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}},
     "speculative_config unset"),
    ({"name": "hsd"}, {"data_parallel_size": 2}, "data_parallel_size"),
    ({"name": "hpd", "top": 2}, {}, "one chain per request"),
    ({"name": "padoc_hsd", "mtp": True}, {}, "one speculative method"),
    ({"name": "mtp"}, {"tensor_parallel_size": 2}, "registered with vLLM in this process"),
    ({"name": "mtp"}, {"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}},
     "speculative_config unset"),
])
def test_unsupported_drafting_is_refused_in_one_line(params, cfg, words):
    from treedec.runtimes.vllm.runtime import VLLMConfig, parse_pages_vllm
    from treedec.strategies.base import build_strategy
    from treedec.tokenizer import Tokenizer

    strategy = build_strategy(params, Tokenizer())
    with pytest.raises(UserError, match=words) as e:
        parse_pages_vllm(None, strategy, [], VLLMConfig(**cfg), progress=False)
    assert "\n" not in str(e.value)


def test_a_drafter_without_a_proposer_is_refused():
    from treedec.drafters.page_drafts import SequenceDrafter
    from treedec.runtimes.vllm.hsd import draft_refusal
    from treedec.runtimes.vllm.runtime import VLLMConfig
    from treedec.strategies.base import STRATEGIES
    from treedec.tokenizer import Tokenizer

    class OtherDrafter:  # drafts made as it decodes, on nothing vLLM hands a proposer
        trees, needs_hidden, pages_ahead, depth, drafts_in_forward = False, False, False, 4, False

        def for_run(self, vlm):
            return self

        def propose_many(self, requests):
            return [None] * len(requests)

        def observe(self, graph, sid, sample, tree, verdict):
            pass

    strategy = STRATEGIES.get("sequential")(Tokenizer())
    assert "OtherDrafter" in draft_refusal(replace(strategy, drafter=OtherDrafter()), VLLMConfig())
    # per-sample sequences (HSD stage 1's crops): served from the store
    assert draft_refusal(replace(strategy, drafter=SequenceDrafter()), VLLMConfig()) is None


# ---------------------------------------------------------------------- one engine
def _reversed_contents(page):
    junk = copy.deepcopy(page)
    for b in junk.blocks:
        b.content = b.content[::-1]
    return junk


@pytest.fixture(scope="module")
def drafted_runs(vllm_engines):
    """(embedded base run, {drafts kind: vLLM drafted run}) per drafted strategy; each run a
    (RunResult, token ids per page) pair (`run_with_ids`)."""
    _vllm_or_skip()
    from treedec.engine.engine import EngineConfig
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import build_strategy

    vlm, samples = _vlm(), _samples()
    out = {}
    for name, base in (("hsd", "sequential"), ("padoc_hsd", "padoc")):
        emb = run_with_ids(EmbeddedRuntime(EngineConfig(max_new_tokens=MAX_NEW, max_pages=4)), vlm,
                           build_strategy({"name": base}, vlm.tokenizer), samples)
        runs = {}
        for kind, make in (("own", lambda p: p), ("junk", _reversed_contents)):
            drafted = [copy.copy(s) for s in samples]
            for s, rec in zip(drafted, emb[0].records):
                s.page = make(rec.page)  # drafts=oracle drafts from the sample's page
            strategy = build_strategy({"name": name, "drafts": "oracle", "stage1": False}, vlm.tokenizer)
            runs[kind] = run_with_ids(VLLMRuntime(VLLMConfig(max_new_tokens=MAX_NEW, max_pages=4), FIXTURE,
                                                  vllm_engines), vlm, strategy, drafted)
        out[name] = (emb, runs)
    return out


@pytest.mark.xdist_group("vllm")
@pytest.mark.parametrize("name", ["hsd", "padoc_hsd"])
@pytest.mark.parametrize("kind", ["own", "junk"])
def test_vllm_drafted_pages_equal_the_base_strategys(drafted_runs, name, kind):
    (emb, emb_ids), runs = drafted_runs[name]
    vll, vll_ids = runs[kind]
    assert vll.strategy == name
    assert_same_ids(vll_ids, emb_ids)  # every stream, token id for token id
    # drafts both accepted and rejected: a lossless check where no draft was refused proves less
    assert sum(v.drafted for v in vll.records) > sum(v.accepted for v in vll.records) > 0
    for e, v in zip(emb.records, vll.records):
        assert v.text == e.text, e.name
        assert v.generated == e.generated and v.streams == e.streams and v.flags == e.flags, e.name
        assert v.extra["draft_source"] == "oracle" and v.extra["stage1_crops"] == 0, e.name  # stage1=false
        assert v.drafted >= v.accepted > 0, e.name
        assert v.steps < e.steps, e.name  # base steps: the same on both runtimes (test_vllm_backend)
        assert v.accepted_per_step > 1, e.name
    if kind == "own":  # drafts the model agrees with: most tokens come from them
        for e, v in zip(emb.records, vll.records):
            assert v.steps * 4 < e.steps and v.accepted > 0.8 * v.generated, (e.name, e.steps, v.steps, v.accepted)


@pytest.mark.xdist_group("vllm")
def test_drafted_strategies_share_one_engine_whose_store_is_cleared(drafted_runs, vllm_engines):
    stores = [e.drafts for e in vllm_engines.engines.values() if e.drafts is not None]
    assert len(stores) == 1
    assert stores[0].read().drafts == []  # a finished run leaves no drafts behind


@pytest.fixture(scope="module")
def stage1_runs(drafted_runs, vllm_engines):
    """`hsd` with stage 1 (oracle drafts = the model's own pages) on both runtimes, 2 pages:
    per runtime (RunResult, ids per page, the drafts stage 2 verified: [stage-1 page, draft])."""
    from treedec.engine.engine import EngineConfig
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import build_strategy

    (emb, _), _ = drafted_runs["hsd"]
    vlm = _vlm()
    samples = [copy.copy(s) for s in _samples(2)]
    for s, rec in zip(samples, emb.records):
        s.page = rec.page
    out = {}
    for runtime in (EmbeddedRuntime(EngineConfig(max_new_tokens=MAX_NEW, max_pages=4)),
                    VLLMRuntime(VLLMConfig(max_new_tokens=MAX_NEW, max_pages=4), FIXTURE, vllm_engines)):
        strategy = build_strategy({"name": "hsd", "drafts": "oracle"}, vlm.tokenizer)
        pages = strategy.drafter.inner  # draft_len=adaptive: the page drafts inside
        runs, made = [], pages.for_run
        pages.for_run = lambda vlm: runs.append(made(vlm)) or runs[-1]  # each run's own source, kept
        res, ids = run_with_ids(runtime, vlm, strategy, samples)
        out[runtime.name] = (res, ids, runs[-1].pages)  # the timed run's (after the warm-up's)
    return out


@pytest.mark.xdist_group("vllm")
def test_vllm_runs_hsd_stage1_as_the_embedded_engine(drafted_runs, stage1_runs):
    """Stage 1 on vLLM: the crops decoded there refine the drafts exactly as on the embedded
    engine (the same stage-1 text per page); the pages stay the base strategy's."""
    (_, base_ids), _ = drafted_runs["hsd"]
    emb, emb_ids, emb_drafts = stage1_runs["embedded"]
    vll, vll_ids, vll_drafts = stage1_runs["vllm"]
    pages = [r.name for r in vll.records]  # vll_ids also has the crops, decoded by the same (wrapped) runtime
    assert any("#" in n for n in vll_ids) and pages == [r.name for r in emb.records]
    assert_same_ids({n: vll_ids[n] for n in pages}, {n: emb_ids[n] for n in pages})
    assert_same_ids({n: vll_ids[n] for n in pages}, {n: base_ids[n] for n in pages})
    assert not any("stage 1 (decoding the draft regions' crops) is skipped" in n for n in vll.notes)
    for e, v in zip(emb.records, vll.records):
        assert v.extra["stage1_crops"] == e.extra["stage1_crops"] > 0, e.name
        # stage-1 steps not compared: the crops get other drafts on vLLM (matched over all crops)
        assert v.extra["stage1_steps"] > 0 and e.extra["stage1_steps"] > 0, e.name
        stage1 = [b.content for b in vll_drafts[v.name][0].reading_order()]
        assert stage1 == [b.content for b in emb_drafts[e.name][0].reading_order()], e.name
        assert stage1 != [b.content for b in vll_drafts[v.name][1].reading_order()], e.name  # stage 1 changed them
    assert sum(r.drafted for r in vll.records) > sum(r.accepted for r in vll.records) > 0
    # stage 1's crops run on the run's own runtime, so their forwards (scheduler iterations) are the run's: a page
    # takes part in at most every one of them, stage 1's and stage 2's (its steps add the two)
    for run in (emb, vll):
        assert run.forward_passes >= max(r.steps for r in run.records) > max(r.extra["stage1_steps"] for r in run.records)
