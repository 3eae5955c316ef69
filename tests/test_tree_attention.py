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
