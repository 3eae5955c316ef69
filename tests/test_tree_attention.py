"""Tree-varlen training equals the dense-mask reference: same loss, same gradients."""
import random

import pytest
import torch
import torch.nn.functional as F

from treedec.graph import DecodingGraph
from treedec.models.attention import register
from treedec.training.packing import IGNORE, pack

from engine_helpers import tiny_llama

ATOL = 1e-5  # float32; observed differences are ~1e-7


def random_graph(rng: random.Random, vocab: int, nested: bool) -> DecodingGraph:
    g = DecodingGraph()
    g.root([rng.randrange(vocab) for _ in range(rng.randint(3, 8))])
    frontier = [0]
    for _ in range(rng.randint(1, 6)):
        parent = rng.choice(frontier)
        p = g[parent]
        g.append(parent, [rng.randrange(vocab) for _ in range(rng.randint(1, 6))])
        child = g.fork(parent, len(p.tokens) - rng.randint(0, 2) - 1 if len(p.tokens) > 3 else len(p.tokens) - 1,
                       [rng.randrange(vocab)])
        g.append(child.id, [rng.randrange(vocab) for _ in range(rng.randint(1, 9))])
        if nested:
            frontier.append(child.id)
    for s in g.streams:
        g.append(s.id, [rng.randrange(vocab)])  # every stream ends with one more token
    return g


def _loss(model, packed, tree: bool):
    kw = dict(input_ids=packed.ids[None], position_ids=packed.positions[None])
    if tree:
        logits = model(**kw, tree=packed.tree).logits[0]
    else:
        mask = torch.zeros(packed.tree.total, packed.tree.total).masked_fill(~packed.tree.dense_mask(), float("-inf"))
        logits = model(**kw, attention_mask=mask[None, None]).logits[0]
    return F.cross_entropy(logits, packed.labels, ignore_index=IGNORE)


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_tree_varlen_equals_dense_mask(seed, nested):
    rng = random.Random(seed)
    model = tiny_llama(seed, attn=register())
    ref = tiny_llama(seed, attn="sdpa")
    ref.load_state_dict(model.state_dict())
    graphs = [random_graph(rng, model.config.vocab_size, nested) for _ in range(rng.randint(1, 3))]
    packed = pack(graphs)
    a, b = _loss(model, packed, tree=True), _loss(ref, packed, tree=False)
    a.backward()
    b.backward()
    assert torch.allclose(a, b, atol=ATOL), (a.item(), b.item())
    worst = max((p.grad - q.grad).abs().max().item() for p, q in zip(model.parameters(), ref.parameters()))
    assert worst < ATOL, worst


def test_packing_matches_the_graph():
    g = DecodingGraph()
    g.root([1, 2, 3])  # prompt
    g.append(0, [4, 9, 5, 6])  # layout: 9 is a fork token at index 4
    g.fork(0, 4, [7])
    g.append(1, [8, 6])
    p = pack([g])
    assert p.ids.tolist() == [1, 2, 3, 4, 9, 5] + [7, 8]
    assert p.labels.tolist() == [IGNORE, IGNORE, 4, 9, 5, 6] + [8, 6]
    assert p.positions.tolist() == [0, 1, 2, 3, 4, 5] + [4, 5]
    dense = p.tree.dense_mask()
    assert dense[6].tolist() == [True] * 4 + [False, False] + [True, False]  # branch sees prompt+layout before the fork


# --- the autograd Function itself, on random q/k/v -------------------------------------------------
from treedec.models import tree_attention as A  # noqa: E402
from treedec.models.tree_attention import Segment, TreeLayout, tree_attention  # noqa: E402


def random_layout(rng: random.Random, n_seg: int) -> TreeLayout:
    """Segments of 1..24 tokens; each non-root one sees its parent's chain plus 0..all of its parent."""
    segs, at = [], 0
    for i in range(n_seg):
        n = rng.randint(1, 24)
        prefix = ()
        if i:
            p = rng.randrange(i)
            prefix = segs[p].prefix + ((p, rng.randint(0, segs[p].length)),)
        segs.append(Segment(at, n, prefix))
        at += n
    return TreeLayout(tuple(segs))


def dense_reference(q, k, v, tree: TreeLayout, scale: float):
    """Plain softmax attention under the dense mask; q [1, H, L, D], k/v [1, Hkv, L, D] -> [1, L, H, D]."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2) * scale).masked_fill(~tree.dense_mask(), float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2)


def _qkv(L, heads, kv_heads, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    make = lambda h: torch.randn(1, h, L, 16, generator=g, dtype=dtype).requires_grad_()  # noqa: E731
    return make(heads), make(kv_heads), make(kv_heads), torch.randn(1, L, heads, 16, generator=g, dtype=dtype)


def _grads(out, do, *leaves):
    return torch.autograd.grad(out, leaves, do)


@pytest.mark.parametrize("backend,chunk", [("flash", A.MATH_CHUNK), ("math", A.MATH_CHUNK), ("math", 5)])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("small_parts", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_function_equals_dense_reference(seed, small_parts, heads, kv_heads, backend, chunk, monkeypatch):
    if small_parts:  # many ancestor chunks (some splitting a viewer), heavy padding in own-segment buckets
        monkeypatch.setattr(A, "ANCESTOR_ROWS", 7)
        monkeypatch.setattr(A, "BUCKET_RATIO", 0.2)
    rng = random.Random(seed)
    tree = random_layout(rng, rng.randint(1, 12))
    q, k, v, do = _qkv(tree.total, heads, kv_heads, torch.float32, seed)
    out = tree_attention(q, k, v, tree, 0.3, backend=backend, chunk=chunk)
    ref = dense_reference(q, k, v, tree, 0.3)
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert (out - ref).abs().max() < ATOL
    for a, b in zip(_grads(out, do, q, k, v), _grads(ref, do, q, k, v)):
        assert a.dtype == torch.float32 and (a - b).abs().max() < ATOL


@pytest.mark.parametrize("backend", ["flash", "math"])
def test_function_float64(backend):
    tree = random_layout(random.Random(7), 10)
    q, k, v, do = _qkv(tree.total, 4, 2, torch.float64, 7)
    out, ref = tree_attention(q, k, v, tree, 0.25, backend=backend), dense_reference(q, k, v, tree, 0.25)
    assert out.dtype == torch.float64 and (out - ref).abs().max() < 1e-12
    for a, b in zip(_grads(out, do, q, k, v), _grads(ref, do, q, k, v)):
        assert (a - b).abs().max() < 1e-12


@pytest.mark.parametrize("backend", ["flash", "math"])
def test_function_under_bf16_autocast(backend):
    """Under autocast the Function computes in bfloat16 (like SDPA does) and returns float32 gradients
    to float32 leaves; values match the float64 reference to bfloat16 precision."""
    tree = random_layout(random.Random(3), 10)
    q, k, v, do = _qkv(tree.total, 4, 2, torch.float32, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = tree_attention(q, k, v, tree, 0.25, backend=backend)
    assert out.dtype == torch.bfloat16
    grads = _grads(out, do.bfloat16(), q, k, v)
    assert all(g.dtype == torch.float32 for g in grads)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = dense_reference(*leaves, tree, 0.25)
    assert (out.double() - ref).abs().max() < 3e-2
    for a, b in zip(grads, _grads(ref, do.double(), *leaves)):
        assert (a.double() - b).abs().max() < 5e-2 * max(1.0, b.abs().max().item())


def test_function_saves_linear_memory():
    """What the Function keeps for backward is O(L): q, k, v, the output and the log-sum-exp, no scores."""
    segs = [Segment(0, 400)]  # a page-like tree: a layout stream and 16 branches forking from it
    for i in range(16):
        segs.append(Segment(400 + 60 * i, 60, ((0, 100 + 18 * i),)))
    tree = TreeLayout(tuple(segs))
    L = tree.total
    q, k, v, do = _qkv(L, 4, 2, torch.float32, 0)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        out = tree_attention(q, k, v, tree, 0.25)
    assert sum(saved) <= L * 16 * (4 + 2 + 2 + 4) + L * 4, (sum(saved), L)
    out.backward(do)


def test_bf16_autocast_model_as_close_as_dense_mask():
    """Under bf16 autocast (as the trainer runs) the tree path is as close to the float32 reference
    as the dense-mask SDPA path under the same autocast."""
    packed = pack([random_graph(random.Random(11), tiny_llama().config.vocab_size, nested=True) for _ in range(2)])

    def run(tree: bool, bf16: bool):
        model = tiny_llama(11, attn=register() if tree else "sdpa")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = _loss(model, packed, tree=tree)
        loss.backward()
        return loss.item(), [p.grad for p in model.parameters()]

    (l32, g32), (ld, gd), (lt, gt) = run(False, False), run(False, True), run(True, True)
    assert abs(lt - l32) < 1e-2 and abs(ld - l32) < 1e-2, (l32, ld, lt)
    rel = lambda gs: [((a - b).norm() / b.norm()).item() for a, b in zip(gs, g32)]  # noqa: E731
    for et, ed in zip(rel(gt), rel(gd)):
        assert et <= 1.5 * ed + 1e-3, (et, ed)


def test_plan_rejects_bad_layouts():
    with pytest.raises(ValueError):
        TreeLayout((Segment(0, 3), Segment(3, 2, ((0, 4),)))).plan()  # sees more than the ancestor has
    with pytest.raises(ValueError):
        TreeLayout((Segment(0, 3), Segment(4, 2))).plan()  # a gap


@pytest.mark.parametrize("backend", ["flash", "math"])
def test_function_without_ancestor_parts(backend):
    """Flat layouts (independent streams, or prefixes of zero tokens): only causal own parts."""
    tree = TreeLayout((Segment(0, 9), Segment(9, 4, ((0, 0),)), Segment(13, 7)))
    q, k, v, do = _qkv(tree.total, 2, 1, torch.float32, 1)
    out, ref = tree_attention(q, k, v, tree, 0.3, backend=backend), dense_reference(q, k, v, tree, 0.3)
    assert (out - ref).abs().max() < ATOL
    for a, b in zip(_grads(out, do, q, k, v), _grads(ref, do, q, k, v)):
        assert (a - b).abs().max() < ATOL
