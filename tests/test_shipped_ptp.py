"""The shipped PTP placeholders on the shipped model, from a copy of its folder WITHOUT the
MTP head (`mtp/` absent): found beside the checkpoint by default, and lossless on held-out
pages (every stream's token ids equal sequential's / padoc's) with drafts both accepted and
rejected, in fewer steps; their depth-1 guesses land often (trained, not random)."""
import shutil

import pytest

from treedec.drafters.mtp import HEAD_DIR
from treedec.drafters.ptp import PTP_DIR
from treedec.models.placeholders import CONFIG
from treedec.models.vlm import SHIPPED

from lossless_helpers import assert_lossless, decode

pytestmark = pytest.mark.skipif(not (SHIPPED / PTP_DIR / CONFIG).is_file(), reason="no shipped PTP placeholders")

PAGES = 4


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    """The shipped model loaded from a copy of its folder with no MTP head, and 4 held-out pages."""
    import torch
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm

    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("tiny") / "tiny"
    shutil.copytree(SHIPPED, d, ignore=shutil.ignore_patterns(HEAD_DIR))
    assert not (d / HEAD_DIR).exists() and (d / PTP_DIR).is_dir()
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": str(d)}))
    samples = list(open_dataset({"name": "synth", "pages": PAGES, "seed": 1_000_000}, model_pages=vlm.pages))
    return vlm, samples


@pytest.mark.parametrize("base", ["sequential", "padoc"])
def test_shipped_placeholders_are_lossless_without_the_mtp_head(headless, base):
    from treedec.engine.engine import EngineConfig
    from treedec.strategies.base import build_strategy

    vlm, samples = headless
    ecfg = EngineConfig(max_pages=PAGES, max_new_tokens=512)
    plain = decode(vlm, build_strategy({"name": base}, vlm.tokenizer), samples, ecfg)
    strategy = build_strategy({"name": "ptp", "base": base}, vlm.tokenizer)
    strategy = strategy.for_run(vlm)  # the placeholders found beside the checkpoint
    spec = decode(vlm, strategy, samples, ecfg)
    assert_lossless(plain, spec)
    assert sum(r.steps for r in spec.values()) < sum(r.steps for r in plain.values())
    first = [sum(r.by_depth[0][i] for r in spec.values()) for i in range(2)]
    assert first[1] > 0.3 * first[0], first
