"""`python -m treedec draft`: drafts written as OmniDocBench JSON, one per page, read back by
`strategy.drafts=DIR` (treedec.ocr.folder); HSD from such a folder decodes as HSD drafting itself."""
import json
import os
import subprocess
import sys

import pytest
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.io.omnidocbench import page_to_omnidocbench
from treedec.ocr.clock import STAGES, StageClock
from treedec.ocr.folder import HASH_KEY, drafts_dir, read_drafts
from treedec.page import Block, Page

from conftest import ROOT

TINY = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), furniture_prob=0.0)


def _needs_ocr():
    for mod in ("rapidocr", "rapid_layout", "rapid_table", "onnxruntime", "cv2"):
        pytest.importorskip(mod)


def test_stage_clock_counts_nested_stages_once():
    clock = StageClock()
    with clock("rules"):
        sum(range(200_000))
        with clock("recognition"):
            sum(range(400_000))
    got = clock.reset()
    assert set(got) == set(STAGES) and got["recognition"] > 0 and got["rules"] > 0
    assert clock.seconds["rules"] == 0.0
    with pytest.raises(ValueError, match="unknown drafting stage"):
        with clock("nope"):
            pass


def test_folder_drafts_are_read_by_name_and_a_missing_or_foreign_one_is_flagged(tmp_path):
    from treedec.ocr.cache import image_hash

    samples = [generate_page(s, TINY) for s in range(3)]
    folder = tmp_path / "drafts"
    folder.mkdir()
    made = {}
    for s, source in zip(samples, (samples[0], samples[2])):  # page 1's file is drafted from page 2's pixels
        page = Page(width=128, height=128, blocks=[Block("text_block", (1, 2, 60, 30), f"of {source.name}", order=1)],
                    info={"drafter": "x/1", HASH_KEY: image_hash(source.image)})
        made[s.name] = page
        (folder / f"{s.name}.json").write_text(json.dumps(page_to_omnidocbench(page)))
    got = read_drafts(samples, tmp_path)  # a `draft` output folder: its drafts/ subfolder
    assert drafts_dir(tmp_path) == folder and set(got) == {s.name for s in samples}
    first = got[samples[0].name]
    assert [b.content for b in first.blocks] == [f"of {samples[0].name}"] and "draft_flag" not in first.info
    assert got[samples[1].name].blocks == [] and "another image" in got[samples[1].name].info["draft_flag"]
    assert got[samples[2].name].blocks == [] and "no draft" in got[samples[2].name].info["draft_flag"]


def test_drafts_option_names_an_existing_folder():
    from treedec.errors import UserError
    from treedec.strategies.hsd import HSDOptions

    with pytest.raises(UserError, match="no such folder"):
        HSDOptions(drafts="/no/such/drafts")


@pytest.fixture(scope="module")
def drafted_dir(tmp_path_factory):
    """`python -m treedec draft` on two tiny synthetic pages (the real drafter)."""
    _needs_ocr()
    out = tmp_path_factory.mktemp("draft")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "treedec", "draft", "data=synth", "data.pages=2", "data.seed=3000000",
                        "data.page.width=128", "data.page.height=128", f"out={out}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_draft_command_writes_a_json_per_page_and_cpu_per_page(drafted_dir):
    summary = json.loads((drafted_dir / "summary.json").read_text())
    assert summary["pages"] == summary["pages_drafted"] == 2 and summary["pages_flagged"] == 0
    assert summary["cpu_s_per_page"] > 0 and summary["drafter"]["tag"].startswith("pipeline-ocr/")
    assert {"engine", "precision", "why"} <= set(summary["drafter"]) and summary["drafter"]["why"]
    from treedec.ocr.choice import choose  # the pair auto means here (the suite's TREEDEC_DRAFTER_ENGINE included)
    assert (summary["drafter"]["engine"], summary["drafter"]["precision"]) == (choose().engine, choose().precision)
    assert set(summary["meta"]["cpu"]) >= {"model", "flags", "cores", "kind"}
    assert set(summary["stage_cpu_s_per_page"]) == set(STAGES) and summary["stage_cpu_s_per_page"]["detection"] > 0
    assert summary["onnxruntime_threads"] == {"intra_op": 1, "inter_op": 1}
    staged = sum(summary["stage_cpu_s_per_page"].values()) * 2 + summary["other_cpu_s"]
    assert abs(staged - summary["cpu_s"]) < 0.01  # the split adds up to the process's CPU
    names = sorted(p.stem for p in (drafted_dir / "drafts").glob("*.json"))
    assert names == ["synth_3000000", "synth_3000001"]
    for name in names:
        data = json.loads((drafted_dir / "drafts" / f"{name}.json").read_text())
        assert data["layout_dets"] and data["page_info"]["width"] == 128 and data["page_info"][HASH_KEY]
        figures = json.loads((drafted_dir / "pages" / f"{name}.json").read_text())
        assert figures["cpu_s"] > 0 and set(figures["stages_cpu_s"]) == set(STAGES)


def test_a_page_that_cannot_be_read_is_written_flagged(tmp_path):
    from omegaconf import OmegaConf

    from treedec.commands import draft
    from treedec.run.outputs import RunOutput

    _needs_ocr()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "broken.png").write_bytes(b"not a png")
    cfg = OmegaConf.create({"data": {"name": "images", "root": str(tmp_path / "in")}, "ocr": None})
    summary = draft.main(cfg, RunOutput(tmp_path / "out"))
    assert summary["pages"] == summary["pages_flagged"] == 1 and summary["pages_drafted"] == 0
    assert summary["cpu_s_per_page"] is None
    figures = json.loads((tmp_path / "out" / "pages" / "broken.json").read_text())
    assert figures["flags"] and "unreadable" in figures["flags"][0]


def test_hsd_from_a_draft_folder_decodes_as_hsd_drafting_itself(drafted_dir, tmp_path):
    """The same drafts, made by `draft` or by the run: the same token ids, steps and accepted
    drafts (> 0), page for page; with a folder nothing is drafted in the run."""
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.engine.engine import EngineConfig
    from treedec.models.loader import load_vlm
    from treedec.models.vlm import SHIPPED
    from treedec.run.stages import run_strategy
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.strategies.base import build_strategy

    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped model in this checkout")
    torch.set_num_threads(1)
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    samples = list(open_dataset({"name": "synth", "pages": 2, "seed": 3_000_000, "page": {"width": 128, "height": 128}}))
    runs = {}
    for drafts in ("pipeline", str(drafted_dir)):
        strategy = build_strategy({"name": "hsd", "drafts": drafts, "cache_dir": str(tmp_path / "cache")}, vlm.tokenizer)
        runs[drafts] = run_strategy(EmbeddedRuntime(EngineConfig(max_pages=4, max_new_tokens=256)), vlm, strategy,
                                    samples, progress=False, warmup=False, cold_drafts=False)
    own, folder = (sorted(runs[k].records, key=lambda r: r.name) for k in ("pipeline", str(drafted_dir)))
    assert [r.name for r in own] == [r.name for r in folder] == [s.name for s in samples]
    for a, b in zip(own, folder):
        assert [s.tokens for s in a.decoding.graph.streams] == [s.tokens for s in b.decoding.graph.streams], a.name
        assert (a.steps, a.accepted, a.drafted) == (b.steps, b.accepted, b.drafted), a.name
        assert "draft_flag" not in b.extra
    assert sum(r.accepted for r in folder) > 0
