"""Drafters never see the ground truth: with the page's ground truth removed from every
sample, the drafts proposed (token for token, every stream, every step) and the steps are
the same. On the shipped model, so that drafts are proposed and accepted (a random model's
output never matches a pipeline's drafts: such a test would compare empty drafts): HSD from
a pipeline OCR's drafts (stage 1 included), HPD from the shipped MTP head on hidden states."""
import copy
from dataclasses import replace

import pytest

from test_shipped_model import shipped  # noqa: F401 (a fixture: the shipped model, 8 held-out pages)

from treedec.drafters.mtp import HEAD_DIR
from treedec.engine.engine import EngineConfig
from treedec.models.mtp_head import CONFIG
from treedec.models.vlm import SHIPPED
from treedec.run.stages import run_strategy
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy

PAGES = 2


class Recorder:
    """Wraps a drafter; notes every proposal."""

    def __init__(self, inner):
        self.inner, self.seen = inner, []
        self.trees, self.needs_hidden, self.pages_ahead, self.depth, self.drafts_in_forward = \
            inner.trees, inner.needs_hidden, inner.pages_ahead, inner.depth, inner.drafts_in_forward

    def for_run(self, vlm):
        self.inner = self.inner.for_run(vlm)  # the run's source, recorded (across runs)
        return self

    def use(self, name, *drafts):
        self.inner.use(name, *drafts)

    def propose_many(self, requests):
        return [self.propose(*r) for r in requests]

    def observe(self, graph, sid, sample, tree, verdict):
        self.inner.observe(graph, sid, sample, tree, verdict)

    def propose(self, graph, sid, sample, state=None):
        tree = self.inner.propose(graph, sid, sample, state)
        self.seen.append((sample.name, sid, len(graph[sid].tokens), (tree.tokens, tree.parents) if tree else None))
        return tree


@pytest.mark.parametrize("name", ["hpd", "padoc_hsd"])
def test_drafts_and_steps_do_not_depend_on_the_ground_truth(name, shipped, tmp_path):  # noqa: F811
    if name == "padoc_hsd":
        for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
            pytest.importorskip(mod)
    elif not (SHIPPED / HEAD_DIR / CONFIG).is_file():
        pytest.skip("no shipped MTP head")
    vlm, samples = shipped
    samples = samples[:PAGES]
    blind = [copy.copy(s) for s in samples]
    for s in blind:
        s.page, s.cells = None, {}
    runs = []
    for i, batch in enumerate((samples, blind)):  # a draft cache each: the pipeline runs on both
        cfg = {"name": name} if name == "hpd" else {"name": name, "drafts": "pipeline", "cache_dir": str(tmp_path / str(i))}
        strategy = build_strategy(cfg, vlm.tokenizer)
        rec = Recorder(strategy.drafter)
        strategy = replace(strategy, drafter=rec)
        runtime = EmbeddedRuntime(EngineConfig(max_pages=PAGES, max_new_tokens=512))
        res = run_strategy(runtime, vlm, strategy, batch, progress=False, warmup=False)
        runs.append((rec.seen, [(r.text, r.steps, r.drafted, r.accepted, r.extra) for r in res.records]))
    assert all(r[3] > 0 and r[2] > r[3] for r in runs[0][1])  # every page: drafts accepted and rejected
    assert runs[0] == runs[1]
