"""Degraded drafts (`strategy.draft_noise`): seeded, edited at the rate asked, boxes kept; HSD
on degraded drafts still gives its base strategy's pages, token for token, with fewer tokens
accepted."""
import pytest
import torch

from treedec.drafters.draft_noise import degrade
from treedec.errors import UserError
from treedec.metrics.edit_distance import edit_distance
from treedec.models.vlm import SHIPPED
from treedec.strategies.base import build_strategy

from engine_helpers import TOK


def test_degrade_is_seeded_keeps_boxes_and_edits_at_the_rate(synth_pages):
    pages = synth_pages[:40]
    assert degrade(pages[0], 0.0, "a") is pages[0]
    for rate in (0.05, 0.3):
        out = [degrade(p, rate, f"p{i}") for i, p in enumerate(pages)]
        again = [degrade(p, rate, f"p{i}") for i, p in enumerate(pages)]
        assert [[b.content for b in p.blocks] for p in out] == [[b.content for b in p.blocks] for p in again]
        assert [[b.bbox for b in p.blocks] for p in out] == [[b.bbox for b in p.blocks] for p in pages]
        chars = sum(len(b.content) for p in pages for b in p.blocks)
        edited = sum(edit_distance(a.content, b.content)
                     for p, q in zip(pages, out) for a, b in zip(p.blocks, q.blocks))
        assert 0.4 * rate < edited / chars < 1.2 * rate, (rate, edited / chars)
    assert pages[0].blocks[0].content == synth_pages[0].blocks[0].content  # the draft given is not touched


def test_a_rate_outside_0_1_is_a_user_error():
    with pytest.raises(UserError, match="draft_noise"):
        build_strategy({"name": "hsd", "draft_noise": 1.5}, TOK)


@pytest.mark.skipif(not (SHIPPED / "model.safetensors").is_file(), reason="no shipped model in this checkout")
def test_hsd_on_degraded_drafts_is_lossless_and_accepts_less():
    from treedec.data import SynthDataset
    from treedec.engine.engine import EngineConfig
    from treedec.models.vlm import VLM
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime

    torch.set_num_threads(1)
    vlm = VLM.load(SHIPPED)
    samples = list(SynthDataset(pages=3, seed=1_000_000, page=vlm.pages))
    cfg = EngineConfig(max_pages=3, max_new_tokens=512)

    def run(name, **options):
        return run_strategy(EmbeddedRuntime(cfg), vlm, build_strategy({"name": name, **options}, vlm.tokenizer),
                            samples, progress=False, warmup=False).records

    base = run("sequential")
    accepted = {}
    for noise in (0.0, 0.3):
        recs = run("hsd", drafts="oracle", stage1=False, draft_noise=noise)
        assert [r.text for r in recs] == [r.text for r in base]
        assert sum(r.drafted - r.accepted for r in recs) > 0  # some drafted tokens rejected
        accepted[noise] = sum(r.accepted for r in recs)
    assert 0 < accepted[0.3] < accepted[0.0]
