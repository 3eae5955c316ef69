
from dataclasses import replace

import pytest
import torch

from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import CausalLMAdapter, Prompt
from treedec.strategies.base import STRATEGIES

from engine_helpers import TOK, ForcedTree, OneAtATime, prompt, tiny_llama


def hf_greedy(model, ids: list[int], max_new: int, processor=None) -> list[int]:
    out = model.generate(torch.tensor([ids]), max_new_tokens=max_new, do_sample=False,
                         logits_processor=[processor] if processor else None,
                         eos_token_id=TOK.eos_id, pad_token_id=TOK.pad_id, attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return out[0, len(ids):].tolist()


def run(model, strategy: str, prompts, processors=(), **cfg):
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get(strategy)(TOK), EngineConfig(**cfg), processors)
    res = {r.name: r for r in eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)])}
    return eng, [res[f"p{i}"] for i in range(len(prompts))]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_one_stream_equals_hf_greedy(attn):
    model = tiny_llama(1, attn)
    p = prompt(3)
    _, [r] = run(model, "sequential", [p], max_new_tokens=40)
    ours = r.graph[0].tokens[len(p.ids):]
    assert ours == hf_greedy(model, p.ids, 40)
    assert r.steps == len(ours)  # one forward per token, prefill included


@pytest.mark.parametrize("attn, attention", [("sdpa", "blocked"), ("sdpa", "dense"), ("eager", "dense")])
def test_tree_equals_per_branch_decoding(attn, attention):
    model = tiny_llama(2, attn)
    p = prompt(5)
    lengths = [7, 3, 11, 5]
    proc = ForcedTree(len(p.ids), 4, lengths)
    _, [r] = run(model, "padoc", [p], processors=[proc], attention=attention)
    g = r.graph
    assert len(g) == 5 and all(not s.live for s in g.streams)
    # the layout stream equals HF greedy on the prompt
    assert g[0].tokens[len(p.ids):] == hf_greedy(model, p.ids, 200, proc)
    for k, c in enumerate(g.children(0)):
        s = g[c]
        ctx = g.context(c)[: -len(s.tokens)] + s.tokens[:1]  # prompt + layout before its <FORK> + <CHILD>
        assert s.tokens[1:] == hf_greedy(model, ctx, 200, proc), f"branch {k}"
        assert len(s.tokens) == 1 + lengths[k] + 1
    # the tree's critical path is the layout's length, not the sum of contents
    assert r.steps == g.critical_path() < g.total_generated()


def test_flat_and_tree_contents_are_read_from_the_same_prefix():
    """The tree engine's spliced page has the flat form's shape."""
    model = tiny_llama(4)
    p = prompt(7)
    proc = ForcedTree(len(p.ids), 3, [4, 6, 2])
    eng, [r] = run(model, "padoc", [p], processors=[proc])
    flat = eng.policy.flat_text(r.graph)
    assert flat.count("<BLOCK>") == 3 and flat.count("<CHILD>") == 3 and flat.endswith("<eos>")
    assert "<FORK>" not in flat


@pytest.mark.parametrize("attention", ["blocked", "dense"])
def test_results_do_not_depend_on_batch_company(attention):
    model = tiny_llama(3)
    prompts = [prompt(s, n=8 + s) for s in range(5)]
    procs = [ForcedTree(len(p.ids), 1 + i % 3, [3 + i, 5, 2]) for i, p in enumerate(prompts)]

    class PerPrompt:  # route each page's context to its own forced plan (the prompt identifies the page)
        def __call__(self, ids, scores):
            for p, proc in zip(prompts, procs):
                if ids[0, : len(p.ids)].tolist() == p.ids:
                    return proc(ids, scores)
            raise AssertionError("unknown page")

    alone = [run(model, "padoc", [p], processors=[PerPrompt()], attention=attention)[1][0] for p in prompts]
    eng, together = run(model, "padoc", prompts, processors=[PerPrompt()], max_pages=3, compact_min=16, compact_ratio=0.2,
                        attention=attention)
    for a, b in zip(alone, together):
        assert [s.tokens for s in a.graph.streams] == [s.tokens for s in b.graph.streams]
        assert a.steps == b.steps
    assert eng.arena.used == 0


def test_blocked_attention_step_equals_the_dense_mask():
    """One engine step with several pages, forks and drafts: attention page by page gives
    the logits of one forward under the dense arena mask."""
    from treedec.engine.draft import DraftTree

    model = tiny_llama(8)
    prompts = [prompt(s, n=6 + 3 * s) for s in range(4)]
    procs = [ForcedTree(len(p.ids), 2, [5, 3]) for p in prompts]

    class EveryStream(OneAtATime):  # a tree on every stream
        def propose(self, graph, sid, sample, state=None):
            return DraftTree([7, 8, 9, 10], [-1, 0, 0, 2])

    class PerPrompt:
        def __call__(self, ids, scores):
            for p, proc in zip(prompts, procs):
                if ids[0, : len(p.ids)].tolist() == p.ids:
                    return proc(ids, scores)
            raise AssertionError("unknown page")

    logits = {}
    for attention in ("dense", "blocked"):
        eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(max_pages=4, attention=attention),
                     [PerPrompt()])
        eng.policy = replace(eng.policy, drafter=EveryStream())
        seen = []
        step = eng.model.step
        eng.model.step = lambda *a, **k: seen.append(step(*a, **k)) or seen[-1]
        res = list(eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)]))
        assert sum(r.drafted for r in res) > 0  # the trees were verified
        logits[attention] = seen
    assert len(logits["dense"]) == len(logits["blocked"]) > 3
    for a, b in zip(logits["dense"], logits["blocked"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_bad_attention_is_a_user_error():
    from treedec.errors import UserError

    with pytest.raises(UserError, match="attention"):
        Engine(CausalLMAdapter(tiny_llama(0)), STRATEGIES.get("padoc")(TOK), EngineConfig(attention="sparse"))


def test_kv_returns_to_zero_after_every_page():
    model = tiny_llama(5)
    prompts = [prompt(s) for s in range(4)]
    proc = ForcedTree(len(prompts[0].ids), 3, [6, 2, 9])
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(max_pages=2), [proc])
    seen = []
    for r in eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)]):
        seen.append(r.name)
        pid = int(r.name[1:])
        assert all(o != pid for o in eng.arena.owner), "a retired page still holds KV"
    assert sorted(seen) == ["p0", "p1", "p2", "p3"] and eng.arena.used == 0


def test_finished_branches_free_their_kv_while_the_page_runs():
    model = tiny_llama(6)
    p = prompt(1)
    proc = ForcedTree(len(p.ids), 2, [2, 30])
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(), [proc])
    peak = []
    orig = eng._step

    def step():
        orig()
        peak.append(eng.arena.used)
    eng._step = step
    [r] = list(eng.run([("p", p, None)]))
    g = r.graph
    # at the end only the prompt, the layout prefix of branch 2 and branch 2 itself were held
    assert peak[-1] <= g[2].fork_at + len(g[2].tokens)


def test_limits_cut_and_flag_instead_of_dropping():
    model = tiny_llama(7)
    p = prompt(2)
    proc = ForcedTree(len(p.ids), 6, [50] * 6)
    _, [r] = run(model, "padoc", [p], processors=[proc], max_new_tokens=40, max_branches=4)
    assert any("max_new_tokens" in f for f in r.flags)
    assert any("branch limit" in f for f in r.flags)
    assert all(not s.live for s in r.graph.streams)
    assert len(r.graph) == 4


def test_arena_grows_across_pages_and_compacts():
    """Long prompts make the KV buffers grow during steps; later prefills and compaction
    write into them (a regression: in-place updates of inference tensors)."""
    model = tiny_llama(9)
    prompts = [prompt(s, n=200) for s in range(3)]  # fits the first buffer; decoding must grow it
    proc = ForcedTree(len(prompts[0].ids), 2, [60, 80])
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(max_pages=1, compact_min=64,
                                                                                   compact_ratio=0.1), [proc])
    results = list(eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)]))
    assert len(results) == 3 and eng.arena.used == 0
    alone = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK), EngineConfig(), [proc])
    [ref] = list(alone.run([("p2", prompts[2], None)]))
    assert [s.tokens for s in ref.graph.streams] == [s.tokens for s in results[2].graph.streams]
