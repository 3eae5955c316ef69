"""The draft contract's stream state: a drafter that asks for hidden states (`needs_hidden`)
gets, for every stream it drafts, the base model's last-layer hidden state at the row that
chose the stream's last token — the same vector a plain forward over the stream's visible
context gives — whether that token was the bonus of a step or followed accepted drafts."""
from dataclasses import replace

import pytest
import torch

from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import CausalLMAdapter, capture_hidden
from treedec.strategies.base import STRATEGIES

from engine_helpers import TOK, ForcedTree, prompt, tiny_llama
from test_speculative import ReferenceDrafter


class Recording(ReferenceDrafter):
    needs_hidden = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen = []  # (visible context, hidden)

    def propose(self, graph, sid, sample, state=None):
        self.seen.append((graph.context(sid), None if state is None or state.hidden is None else state.hidden.clone()))
        return super().propose(graph, sid, sample, state)


def _hidden_of(model, context):
    """Last-layer hidden state after context[:-1] (the row that chose context[-1])."""
    with torch.inference_mode(), capture_hidden(model) as cap:
        model(input_ids=torch.tensor([context[:-1]]), logits_to_keep=0)
    return cap.rows[0, -1].float()


@pytest.mark.parametrize("name", ["sequential", "padoc"])
@pytest.mark.parametrize("attention", ["dense", "blocked"])
def test_drafters_get_the_hidden_state_of_the_last_verified_token(name, attention):
    model = tiny_llama(11)
    prompts = [prompt(s) for s in range(2)]
    procs = [ForcedTree(len(prompts[0].ids), 3, [9, 4, 12], fork=name == "padoc")]
    eng = Engine(CausalLMAdapter(model), STRATEGIES.get(name)(TOK), EngineConfig(), procs)
    plain = {r.name: r for r in eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)])}
    drafter = Recording(plain["p0"].graph.streams, "tree")
    strategy = replace(STRATEGIES.get(name)(TOK), drafter=drafter)
    assert strategy.needs_hidden
    eng = Engine(CausalLMAdapter(model), strategy, EngineConfig(attention=attention), procs)
    [spec] = list(eng.run([("p0", prompts[0], None)]))
    assert [s.tokens for s in spec.graph.streams] == [s.tokens for s in plain["p0"].graph.streams]
    assert spec.accepted > 0 and spec.drafted > spec.accepted
    with_hidden = [(c, h) for c, h in drafter.seen if h is not None]
    assert len(with_hidden) >= len(drafter.seen) - len(spec.graph) + 1  # only a branch's first draft lacks it
    for context, h in with_hidden:
        torch.testing.assert_close(h, _hidden_of(model, context), atol=1e-4, rtol=1e-4)


def test_the_hidden_keyword_is_additive():
    """Without `hidden` the adapter returns what it always did."""
    adapter = CausalLMAdapter(tiny_llama(3))
    p = prompt(1)
    logits, kv = adapter.prefill(p)
    logits2, kv2, h = adapter.prefill(p, hidden=True)
    torch.testing.assert_close(logits, logits2)
    assert h.shape == (adapter.text_config.hidden_size,)
