"""HSD on the shipped model with real pipeline drafts (issue 33, item 5): `hsd` gives the
sequential pages, `padoc_hsd` the padoc pages, and `padoc_hsd strategy.mtp=true` (page drafts,
the shipped MTP head where they propose nothing) the padoc pages too, token id for token id
in every stream; drafts proposed, accepted and rejected (drafted > accepted > 0), the MTP
head's own drafts among the accepted. Stage 1 reads the draft's crops first, on the run's
runtime. The drafts are made once, cold, into a folder of this module's own."""
import pytest

from test_shipped_model import shipped  # noqa: F401 (a fixture: the shipped model, 8 held-out pages)

from lossless_helpers import VerdictSpy, assert_lossless, decode
from treedec.drafters.mtp import HEAD_DIR
from treedec.engine.engine import EngineConfig
from treedec.models.mtp_head import CONFIG
from treedec.models.vlm import SHIPPED

PAGES = 2
ECFG = EngineConfig(max_pages=PAGES, max_new_tokens=512)


@pytest.fixture(scope="module")
def model_pages(shipped, tmp_path_factory):  # noqa: F811
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
        pytest.importorskip(mod)
    vlm, samples = shipped
    return vlm, samples[:PAGES], str(tmp_path_factory.mktemp("drafts"))


@pytest.fixture(scope="module")
def plain(model_pages):
    from treedec.strategies.base import build_strategy

    vlm, samples, _ = model_pages
    return {b: decode(vlm, build_strategy({"name": b}, vlm.tokenizer), samples, ECFG) for b in ("sequential", "padoc")}


@pytest.mark.parametrize("cfg, base", [({"name": "hsd"}, "sequential"), ({"name": "padoc_hsd"}, "padoc"),
                                       ({"name": "padoc_hsd", "mtp": True}, "padoc")],
                         ids=["hsd", "padoc_hsd", "padoc_hsd-mtp"])
def test_pipeline_drafted_hsd_is_lossless_on_the_shipped_model(model_pages, plain, cfg, base):
    from treedec.run.stages import drafts_ahead
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.strategies.base import build_strategy

    vlm, samples, cache = model_pages
    if cfg.get("mtp") and not (SHIPPED / HEAD_DIR / CONFIG).is_file():
        pytest.skip("no shipped MTP head")
    strategy = build_strategy({**cfg, "cache_dir": cache}, vlm.tokenizer)
    strategy, before = drafts_ahead(EmbeddedRuntime(ECFG), vlm, strategy, samples)  # drafts, stage 1, the head loaded
    spy = VerdictSpy(strategy.drafter.drafters[1]) if cfg.get("mtp") else None  # the run's MTP source
    assert all(before[s.name]["draft_source"] == "pipeline" and before[s.name]["stage1_crops"] > 0 for s in samples)
    spec = decode(vlm, strategy, samples, ECFG)
    drafted, accepted = assert_lossless(plain[base], spec)
    assert sum(r.steps for r in spec.values()) < sum(r.steps for r in plain[base].values())
    if spy is not None:
        assert sum(spy.accepted) > 0, spy.accepted
