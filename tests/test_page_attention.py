"""Page-blocked attention in buckets: same pages as the dense mask and the one-batch layout."""
import random
from dataclasses import replace

import pytest
import torch

from treedec.engine.draft import DraftTree
from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import CausalLMAdapter
from treedec.models.page_attention import buckets_of
from treedec.strategies.base import STRATEGIES

from engine_helpers import TOK, ForcedTree, OneAtATime, prompt, tiny_llama


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ratio", [0.0, 0.5, 0.75])
def test_buckets_hold_every_page_once_and_bound_the_padding(seed, ratio):
    rng = random.Random(seed)
    sizes = [(rng.choice([1, 1, 2, 3, 16]), rng.randint(5, 900)) for _ in range(rng.randint(1, 40))]
    buckets = buckets_of(sizes, ratio)
    assert sorted(i for b in buckets for i in b) == list(range(len(sizes)))
    if ratio == 0.0:
        assert len(buckets) == 1
    for b in buckets:
        R, K = max(sizes[i][0] for i in b), max(sizes[i][1] for i in b)
        assert all(sizes[i][0] >= ratio * R and sizes[i][1] >= ratio * K for i in b)


class PerPrompt:
    """Route each page's context to its own forced plan (the prompt identifies the page)."""

    def __init__(self, prompts, procs):
        self.plans = list(zip(prompts, procs))

    def __call__(self, ids, scores):
        for p, proc in self.plans:
            if ids[0, :len(p.ids)].tolist() == p.ids:
                return proc(ids, scores)
        raise AssertionError("unknown page")


class Replay(OneAtATime):
    """Drafts a stream's continuation from a reference run (same page, same stream id),
    its last node wrong, plus a wrong sibling: some nodes accepted, some rejected."""

    def __init__(self, reference: dict[str, list[list[int]]]):
        self.ref = reference

    def propose(self, graph, sid, sample, state=None):
        s = graph[sid]
        ref = self.ref[sample][sid] if sid < len(self.ref[sample]) else []
        true = ref[len(s.tokens):len(s.tokens) + 2]
        if ref[:len(s.tokens)] != s.tokens or len(true) < 2:
            return None
        return DraftTree(true + [TOK.pad_id, TOK.pad_id], [-1, 0, 1, -1])


def _decode(model, prompts, procs, attention, ratio, drafts=None):
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get("padoc")(TOK),
                 EngineConfig(max_pages=5, attention=attention, bucket_ratio=ratio, compact_min=64, compact_ratio=0.3),
                 [PerPrompt(prompts, procs)])
    if drafts is not None:
        eng.policy = replace(eng.policy, drafter=drafts)
    logits = []
    step = eng.model.step
    eng.model.step = lambda *a, **k: logits.append(step(*a, **k)) or logits[-1]
    res = {r.name: r for r in eng.run([(f"p{i}", p, f"p{i}") for i, p in enumerate(prompts)])}
    return eng, [res[f"p{i}"] for i in range(len(prompts))], logits


def test_attention_layouts_decode_the_same_pages():
    """dense, the former one-batch blocked layout (ratio 0) and buckets give the same token
    ids on pages of mixed KV length and stream count, joining and leaving mid-run, with
    draft trees on some streams (accepted and rejected); logits step by step agree."""
    model = tiny_llama(11)
    prompts = [prompt(s, n=4 + 9 * (s % 4)) for s in range(9)]
    procs = [ForcedTree(len(p.ids), 1 + s % 4, [3 + 2 * s, 5, 9, 2]) for s, p in enumerate(prompts)]
    _, plain, _ = _decode(model, prompts, procs, "dense", 0.5)
    reference = {r.name: [s.tokens for s in r.graph.streams] for r in plain}
    drafts = Replay(reference)
    runs = {}
    for attention, ratio in [("dense", 0.5), ("blocked", 0.0), ("blocked", 0.5), ("auto", 0.5)]:
        runs[attention, ratio] = _decode(model, prompts, procs, attention, ratio, drafts)
    tokens = {k: [[s.tokens for s in r.graph.streams] for r in res] for k, (_, res, _) in runs.items()}
    for k in tokens:
        assert tokens[k] == [reference[f"p{i}"] for i in range(len(prompts))], k
    eng, res, dense_logits = runs["dense", 0.5]
    assert sum(r.accepted for r in res) > 0 and sum(r.drafted - r.accepted for r in res) > 0
    for k in [("blocked", 0.0), ("blocked", 0.5)]:
        assert len(runs[k][2]) == len(dense_logits)
        for a, b in zip(dense_logits, runs[k][2]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    one, buckets = runs["blocked", 0.0][0].attention_stats, runs["blocked", 0.5][0].attention_stats
    dense = eng.attention_stats
    assert one.real == buckets.real == dense.real > 0
    assert buckets.buckets > buckets.blocked_steps  # some steps really were cut into several buckets
    assert dense.padded > one.padded > buckets.padded  # and padding fell
    assert dense.blocked_steps == 0 and buckets.blocked_steps > 0


def test_a_dense_step_reads_shared_kv_heads_in_place_with_the_same_logits():
    """A dense engine step on a model with fewer KV heads than query heads: the engine's path
    (`engine_attention`: SDPA with `enable_gqa`, no K/V copy per query head) gives HF's SDPA
    logits (K/V repeated) bit for bit, for rows with different masks."""
    import contextlib

    import treedec.models.attention as attention
    from treedec.engine.kv import KVArena
    from treedec.models.forced import ForcedModel

    torch.manual_seed(0)
    adapter = ForcedModel("30m").adapter()
    cfg = adapter.text_config
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    arena, S = KVArena(), 300
    with torch.inference_mode():
        for layer in range(cfg.num_hidden_layers):
            shape = (1, cfg.num_key_value_heads, S, cfg.head_dim)
            arena.cache.update(torch.randn(shape), torch.randn(shape), layer)
    ids, pos = torch.randint(10, 100, (3,)), torch.tensor([S, S + 1, S + 1])
    mask = torch.zeros(3, S + 3)
    mask[:, ::4] = mask[0, S + 1:] = mask[1, S + 2] = mask[2, S + 1] = float("-inf")

    def step(m=mask):
        out = adapter.step(ids, pos, m, arena.cache)
        for layer in arena.cache.layers:
            layer.size = S
            layer._views()
        return out

    engine = step()
    path = attention.engine_attention
    attention.engine_attention = lambda config: contextlib.nullcontext()  # the model's own sdpa: K/V repeated
    try:
        hf = step()
    finally:
        attention.engine_attention = path
    assert torch.equal(engine, hf)
    assert not torch.allclose(engine, step(torch.zeros_like(mask)))  # the mask is applied, not dropped


def _five_pages(dtype=torch.float32):
    """Five pages of 1-3 rows and 50-70 keys each (every fifth masked), GQA: 2 KV heads for 6 query
    heads; query, key, value and their groups (rows, keys, mask)."""
    torch.manual_seed(0)
    L, H, Hkv, D = 400, 6, 2, 8
    key, value = torch.randn(1, Hkv, L, D, dtype=dtype), torch.randn(1, Hkv, L, D, dtype=dtype)
    query = torch.randn(1, H, 9, D, dtype=dtype)
    groups, row = [], 0
    for p, (r, k) in enumerate([(1, 60), (2, 70), (1, 50), (3, 65), (2, 55)]):
        keys = torch.arange(p * 80, p * 80 + k)
        mask = torch.zeros(r, k)
        mask[:, ::5] = float("-inf")
        groups.append((torch.arange(row, row + r), keys, mask))
        row += r
    return query, key, value, groups


def test_a_bucket_split_across_calls_gives_the_same_outputs(monkeypatch):
    """On a CPU a bucket's pages go to SDPA in parts whose gathered KV stays below GATHER_BYTES
    (glibc maps larger temporaries afresh at every call): the outputs are the same, bit for bit,
    however many parts (GQA: 2 KV heads for 6 query heads)."""
    import treedec.models.page_attention as pa

    query, key, value, groups = _five_pages()
    batch = pa.PageBatch.build(groups, ratio=0.0)  # one bucket
    assert len(batch.buckets) == 1
    whole = pa.blocked_attention(query, key, value, batch, 0.3)
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, *a, **k: calls.append(q.shape[0]) or sdpa(q, *a, **k))
    monkeypatch.setattr(pa, "GATHER_BYTES", 2 * 70 * 2 * 8 * 4)  # two pages of the bucket's 70 keys per call
    parts = pa.blocked_attention(query, key, value, batch, 0.3)
    assert calls == [2, 2, 1]
    assert torch.equal(whole, parts)


def test_a_batch_moved_once_a_step_reads_its_real_rows_without_masks_of_its_own():
    """`PageBatch.to(device, dtype)` (the adapter's, once a step) casts the masks to the model's
    dtype, so no layer casts them again; the same outputs as casting in every layer. The real rows
    (`keep`, `at`: built on the host) are each page's first rows, every row of the step once."""
    import treedec.models.page_attention as pa

    query, key, value, groups = _five_pages(torch.bfloat16)
    batch = pa.PageBatch.build(groups, ratio=0.0)
    moved = batch.to("cpu", torch.bfloat16)
    assert batch.to("cpu") is batch and moved.to("cpu", torch.bfloat16) is moved
    assert all(b.mask.dtype == torch.float32 for b in batch.buckets)
    assert all(b.mask.dtype == torch.bfloat16 for b in moved.buckets)
    b = moved.buckets[0]
    R = b.rows.shape[1]
    counts = [b.starts[p + 1] - b.starts[p] for p in range(len(b.starts) - 1)]
    assert sorted(counts) == [1, 1, 2, 2, 3] and b.starts[0] == 0  # the bucket's pages (sorted by size), their rows
    assert b.keep.tolist() == [p * R + i for p, c in enumerate(counts) for i in range(c)]
    assert b.at.tolist() == b.rows.flatten()[b.keep].tolist() and sorted(b.at.tolist()) == list(range(9))
    assert torch.equal(pa.blocked_attention(query, key, value, batch, 0.3),
                       pa.blocked_attention(query, key, value, moved, 0.3))
