"""MTP drafting (HPD's P-MTP): the head, its hash guard, the strategies, and lossless
decoding on tiny random models with drafts that are partly right by construction."""
import pytest
import torch

from treedec.drafters.mtp import MTPDrafter
from treedec.engine.draft import DraftTree
from treedec.engine.engine import Engine, EngineConfig
from treedec.errors import UserError
from treedec.models.adapter import CausalLMAdapter, capture_hidden
from treedec.models.mtp_head import MTPConfig, MTPDraftModel, MTPHead, depth_weights, load_head, save_head
from treedec.models.tied_weights import base_hash
from treedec.strategies.base import build_strategy
from treedec.training.mtp import IGNORE, Rows, train_head

from engine_helpers import TOK, ForcedTree, OneAtATime, prompt, tiny_llama


class SeededChains:
    """Stands in for a trained head (`MTPDraftModel.chain`): looks the hidden state up among
    those of a reference run and proposes the reference's next tokens, the `bad`-th one
    wrong, so drafts are accepted up to there and rejected after. A hidden state the engine
    got wrong finds nothing (no draft)."""

    def __init__(self, model, graph, bad: int = 3):
        self.keys, self.conts, self.bad = [], [], bad
        for s in graph.streams:
            ctx = graph.context(s.id)
            with torch.inference_mode(), capture_hidden(model) as cap:
                model(input_ids=torch.tensor([ctx[:-1]]), logits_to_keep=0)
            own = len(ctx) - len(s.tokens)  # where the stream's own tokens start in its context
            for i in range(max(own, s.prompt_len + own) - 1, len(ctx) - 1):  # row i chose ctx[i + 1]
                self.keys.append(cap.rows[0, i].float())
                self.conts.append(ctx[i + 2:])
        self.keys = torch.stack(self.keys)

    def chains(self, hidden, last, k, top=1):
        return [self.chain(hidden, last, k)]

    def chains_many(self, hidden, last, k, top=1):
        return [self.chains(h, t, k, top) for h, t in zip(hidden, last)]

    def chain(self, hidden, last, k):
        d = (self.keys - hidden.float()).abs().amax(-1)
        i = int(d.argmin())
        if d[i] > 1e-3:
            return []
        out = list(self.conts[i][:k])
        if len(out) > self.bad:
            out[self.bad] = (out[self.bad] + 1) % len(TOK)
        return out


def _run(model, strategy, p, procs):
    eng = Engine(CausalLMAdapter(model), strategy, EngineConfig(), procs)
    [r] = list(eng.run([("p", p, None)]))
    assert eng.arena.used == 0
    return r


@pytest.mark.parametrize("name", ["mtp", "hpd"])
def test_mtp_drafting_is_lossless_on_random_models(name):
    model = tiny_llama(11)
    procs = [ForcedTree(len(prompt(0).ids), 3, [9, 4, 12], fork=name == "hpd")]
    base = "sequential" if name == "mtp" else "padoc"
    for seed in range(2):
        p = prompt(seed)
        plain = _run(model, build_strategy({"name": base}, TOK), p, procs)
        strategy = build_strategy({"name": name}, TOK)
        drafter = strategy.drafter
        assert isinstance(drafter, MTPDrafter) and strategy.needs_hidden
        drafter.model = SeededChains(model, plain.graph)
        spec = _run(model, strategy, p, procs)
        assert [s.tokens for s in spec.graph.streams] == [s.tokens for s in plain.graph.streams]
        assert spec.accepted > 0 and spec.drafted > spec.accepted  # accepted and rejected
        assert spec.steps < plain.steps
        assert spec.by_depth[0][1] > 0 and spec.by_depth[3][1] == 0  # the 4th token is always wrong


def own_rows(model, graph, k: int) -> Rows:
    """A run's own training rows, as `collect_rows` makes them from pages: per generated row
    of every stream, the model's hidden state and the stream's next k + 1 tokens."""
    hidden, windows = [], []
    for s in graph.streams:
        ctx = graph.context(s.id)
        with torch.inference_mode(), capture_hidden(model) as cap:
            model(input_ids=torch.tensor([ctx[:-1]]), logits_to_keep=0)
        own = len(ctx) - len(s.tokens)
        for i in range(max(own, s.prompt_len + own) - 1, len(ctx) - 1):  # row i chose ctx[i + 1]
            w = ctx[i + 1:i + k + 2]
            hidden.append(cap.rows[0, i].float())
            windows.append(w + [IGNORE] * (k + 1 - len(w)))
    return Rows(torch.stack(hidden), torch.tensor(windows))


@pytest.fixture(scope="module")
def fitted():
    """A random model, a prompt, its plain padoc run, and the real head module fitted briefly
    (`train_head`) on the model's own output for other prompts (made once for both `top`s)."""
    from types import SimpleNamespace

    model = tiny_llama(12)
    p = prompt(4)
    procs = [ForcedTree(len(p.ids), 2, [6, 5])]
    plain = _run(model, build_strategy({"name": "padoc"}, TOK), p, procs)
    seen = [_run(model, build_strategy({"name": "padoc"}, TOK), prompt(s), procs).graph for s in range(2)]  # other prompts
    rows = [own_rows(model, g, 3) for g in seen]
    rows = Rows(torch.cat([r.hidden for r in rows]), torch.cat([r.window for r in rows]))
    head, _ = train_head(SimpleNamespace(model=model), rows, MTPConfig(hidden=64, k=3), steps=300, lr=3e-3, batch=64,
                         progress=False)
    return model, p, procs, plain, head


@pytest.mark.parametrize("top", [1, 2])
def test_a_fitted_head_drafts_and_stays_lossless(fitted, top):
    """The real head module through the whole path (`fitted`): its k-token chains are partly right
    on a prompt it was not fitted on: the same token ids as without drafts, drafts both accepted
    and rejected."""
    model, p, procs, plain, head = fitted
    strategy = build_strategy({"name": "hpd", "k": 3, "top": top}, TOK)
    strategy.drafter.model = MTPDraftModel.of(head, model)
    spec = _run(model, strategy, p, procs)
    assert [s.tokens for s in spec.graph.streams] == [s.tokens for s in plain.graph.streams]
    assert spec.accepted > 0 and spec.drafted > spec.accepted and len(spec.by_depth) == 3
    assert spec.steps < plain.steps


def test_top_chains_start_from_the_heads_likeliest_first_tokens():
    from treedec.graph import DecodingGraph
    from treedec.engine.draft import StreamState

    model = tiny_llama(12)
    torch.manual_seed(0)
    dm = MTPDraftModel.of(MTPHead(MTPConfig(hidden=64, k=3)), model)
    h = torch.randn(64)
    one, three = dm.chains(h, 5, 3), dm.chains(h, 5, 3, top=3)
    assert one == [dm.chain(h, 5, 3)] and three[0] == one[0] and len({c[0] for c in three}) == 3
    assert all(len(c) == 3 for c in three)
    drafter = MTPDrafter(3, top=3)
    drafter.model = dm
    g = DecodingGraph()
    g.root([1, 5])
    tree = drafter.propose(g, 0, None, StreamState(h))
    assert tree.parents == [-1, 0, 1, -1, 3, 4, -1, 6, 7] and tree.tokens == [t for c in three for t in c]


@pytest.mark.parametrize("top", [1, 2])
def test_a_steps_streams_are_drafted_in_one_batch_as_one_at_a_time(top):
    """The engine asks for every stream of a step at once (`draft_many`); the head's batched
    chains equal its chains stream by stream, and through FirstOf a drafter that does not
    batch is asked one stream at a time for what the first proposed nothing for."""
    from treedec.engine.draft import StreamState
    from treedec.engine.draft_fallback import FirstOf
    from treedec.graph import DecodingGraph

    model = tiny_llama(12)
    torch.manual_seed(1)
    dm = MTPDraftModel.of(MTPHead(MTPConfig(hidden=64, k=4)), model)
    hs, last = torch.randn(5, 64), [5, 9, 5, 11, 7]
    assert dm.chains_many(hs, last, 4, top) == [dm.chains(h, t, 4, top) for h, t in zip(hs, last)]
    drafter = MTPDrafter(4, top=top)
    drafter.model = dm
    graphs = []
    for t in last:
        g = DecodingGraph()
        g.root([1, t])
        graphs.append(g)
    reqs = [(g, 0, None, StreamState(h)) for g, h in zip(graphs, hs)]
    reqs[2] = (graphs[2], 0, None, StreamState(None))  # no hidden state: no MTP draft

    class Fixed(OneAtATime):  # proposes for one stream only, and does not batch
        def __init__(self):
            self.asked = []

        def propose(self, graph, sid, sample, state=None):
            self.asked.append(graph)
            return DraftTree([3], [-1]) if graph is graphs[2] else None

    first = Fixed()
    both = FirstOf([first, drafter]).propose_many(reqs)
    assert first.asked == graphs  # every stream, one at a time
    assert both[2].tokens == [3] and [t.tokens for i, t in enumerate(both) if i != 2] == \
        [drafter.propose(*r).tokens for i, r in enumerate(reqs) if i != 2]
    assert drafter.propose_many(reqs)[2] is None


def test_progressive_weights_go_easy_to_hard():
    assert depth_weights(6, 0.0) == [1, 0, 0, 0, 0, 0]
    assert depth_weights(6, 0.25) == pytest.approx([1, 1, 0.5, 0, 0, 0])
    assert depth_weights(6, 1.0) == [1] * 6


def test_head_refuses_other_base_weights(tmp_path):
    a, b = tiny_llama(1), tiny_llama(2)
    head = MTPHead(MTPConfig(hidden=64, k=2))
    save_head(head, tmp_path, base_hash(a))
    loaded = load_head(tmp_path, a)
    for x, y in zip(head.state_dict().values(), loaded.state_dict().values()):
        torch.testing.assert_close(x.half().float(), y)
    with pytest.raises(UserError, match="trained on base weights") as e:
        load_head(tmp_path, b)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="no MTP head"):
        load_head(tmp_path / "none", a)


@pytest.mark.parametrize("cfg, base, drafters", [
    ({"name": "mtp"}, "flat", ["MTPDrafter"]),
    ({"name": "hpd"}, "tree", ["MTPDrafter"]),
    ({"name": "mtp", "base": "padoc_rows"}, "tree_rows", ["MTPDrafter"]),
    ({"name": "hsd", "base": "padoc_rows", "draft_len": "fixed"}, "tree_rows", ["PageDraftDrafter"]),
    ({"name": "padoc_hsd", "mtp": True}, "tree", ["PageDraftDrafter", "MTPDrafter"]),
])
def test_speculation_wraps_any_fork_strategy(cfg, base, drafters):
    s = build_strategy(cfg, TOK)
    assert s.mode == base and s.name == cfg["name"]
    inner = getattr(s.drafter, "drafters", [s.drafter])
    assert [type(d).__name__ for d in inner] == drafters
    assert s.needs_hidden == ("MTPDrafter" in drafters)


@pytest.mark.parametrize("cfg, match", [({"name": "mtp", "base": "hsd"}, "fork strategy without drafts"),
                                        ({"name": "hsd", "bsae": "padoc"}, "bad config"),
                                        ({"name": "hpd", "base": "padox"}, "did you mean"),
                                        ({"name": "mtp", "k": 0}, "at least 1"),
                                        ({"name": "hpd", "top": 0}, "at least 1")])
def test_bad_speculation_configs_are_user_errors(cfg, match):
    with pytest.raises(UserError, match=match):
        build_strategy(cfg, TOK)
