"""`python -m treedec run` end to end on a random tiny model: outputs, ratios, flags,
throughput and latency at several concurrency levels."""
import importlib.util
import json
import subprocess
import sys

import pytest
from PIL import Image

from cli_helpers import treedec
from conftest import ROOT
from treedec.results.quality import QUALITY_KEYS
from treedec.errors import UserError
from treedec.results.speed import concurrency_levels

TINY = ["model=random", "model.spec.image_size=128", "model.spec.text_layers=1", "model.spec.vision_layers=1",
        "model.spec.vision_hidden=64", "model.spec.vision_heads=1", "model.spec.text_hidden=64", "model.spec.head_dim=32",
        "runtime.max_new_tokens=12", "runtime.threads=1"]
PAGES = ["data.page.width=128", "data.page.height=128", "data.page.cell=[8,8]", "data.page.margin=1"]


def _run(*args, env=None, here=True):
    """`run` on the tiny random model, in this process (`here`) or in a process of its own."""
    return treedec("run", *TINY, *args, env=env, here=here)


def test_run_writes_the_outputs_contract(tmp_path):
    r = _run("data.pages=2", *PAGES, "compare=sequential", f"out={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    for key in ("pages", "text_edit", "layout_f1", "median_steps", "steps_ratio", "tokens_per_step", "pages_per_s",
                "throughput_ratio", "p95_latency_s", "p95_ratio"):
        assert key in s, key
    assert s["pages"] == 2 and s["median_steps"] == 12  # a random model runs into the token limit ...
    assert s["pages_flagged"] == 2  # ... and every such page says so
    pages = sorted(p.name for p in (tmp_path / "pages").iterdir())
    assert pages == sorted([f"synth_{i}.{ext}" for i in (1000000, 1000001) for ext in ("json", "md", "omnidocbench.json")])
    fig = json.loads((tmp_path / "pages" / "synth_1000000.json").read_text())
    assert any("max_new_tokens" in f for f in fig["flags"])
    assert (tmp_path / "steps_hist.png").is_file() and (tmp_path / "timelines.png").is_file()
    assert (tmp_path / "config.yaml").is_file()
    report = (tmp_path / "report.html").read_text()
    assert "steps_ratio" in report
    # one level (runtime.max_pages): by_concurrency has it for both strategies; the report says how to get curves
    assert s["concurrency"] == 16 and [(r["concurrency"], r["strategy"]) for r in s["by_concurrency"]] == \
        [(16, "padoc"), (16, "sequential")]
    assert "concurrency=[1,4,16]" in report and not (tmp_path / "concurrency.png").exists()
    # end to end: the phases add up to the wall time that pages/s divides by, for strategy and baseline
    for fig in (s, s["baseline"]):
        ph = fig["phases_s"]
        assert set(ph) == {"load", "draft", "stage1", "decode", "write", "total"}
        assert ph["load"] > 0 and ph["decode"] > 0 and ph["write"] > 0
        assert ph["total"] == pytest.approx(fig["wall_s"], rel=1e-3)
        assert fig["pages_per_s"] == pytest.approx(2 / fig["wall_s"])
        assert fig["p95_latency_s"] > fig["p95_decode_latency_s"] > 0
    assert s["attention_steps"] > 0 and s["attention_padding"] >= 1.0
    assert "Where the wall time went" in report
    # the baseline's quality has the strategy's figures (TEDS too), not a subset: measured where the strategy's are
    measured = [k for k in QUALITY_KEYS if s[k] is not None]
    assert "text_edit" in measured and "layout_f1" in measured and len(measured) > 2
    assert [k for k in QUALITY_KEYS if s["baseline"][k] is not None] == measured


def test_drafting_is_timed_from_a_cold_cache(tmp_path):
    """HSD: drafting and stage 1 are phases of the run, the drafts come from an empty cache
    (the configured one stays untouched), and the report says so."""
    cache = tmp_path / "cache"
    r = _run("data.pages=2", *PAGES, "strategy=hsd", f"out={tmp_path / 'out'}", env={"TREEDEC_DRAFT_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["drafts"] == "cold (empty cache)"
    from treedec.ocr.choice import choose  # summary.json says which engine and precision drafted, and why
    assert s["drafter"]["engine"] == choose().engine and s["drafter"]["precision"] == choose().precision
    assert s["drafter"]["why"] and s["meta"]["cpu"]["kind"]
    assert s["phases_s"]["draft"] > 0 and s["phases_s"]["stage1"] > 0
    assert s["phases_s"]["total"] == pytest.approx(s["wall_s"], rel=1e-3)
    assert not cache.exists() or not any(cache.iterdir())


def test_run_at_several_concurrency_levels(tmp_path):
    """concurrency=[1,2]: both strategies at both levels, in one process on the same pages;
    the curves in the report; with W&B (offline), the plots, tables and report as media."""
    wandb = importlib.util.find_spec("wandb") is not None
    extra = ["logger=wandb"] if wandb else []
    home = str(tmp_path / "wandb-home")
    env = {"WANDB_SILENT": "true", **{f"WANDB_{d}_DIR": home for d in ("CONFIG", "CACHE", "DATA")}}
    r = _run("data.pages=2", *PAGES, "compare=sequential", "concurrency=[2,1]", *extra, f"out={tmp_path}", env=env,
             here=not wandb)  # W&B starts a service: a process of its own
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    rows = s["by_concurrency"]
    assert [(r["concurrency"], r["strategy"]) for r in rows] == [(1, "padoc"), (1, "sequential"), (2, "padoc"),
                                                                 (2, "sequential")]
    for row in rows:
        for key in ("pages_per_s", "p95_latency_s", "median_latency_s", "median_steps", "throughput_ratio",
                    "p95_ratio"):
            assert row[key] is not None, key
        assert row["pages"] == 2 and row["same_text"] == 1.0  # greedy output does not depend on the batch
    top = rows[2]  # the top-level figures are the largest level's
    assert s["concurrency"] == 2 and s["pages_per_s"] == top["pages_per_s"]
    assert s["p95_latency_s"] == top["p95_latency_s"]
    assert s["throughput_ratio"] == pytest.approx(top["throughput_ratio"])
    assert len(list((tmp_path / "pages").glob("*.md"))) == 2
    report = (tmp_path / "report.html").read_text()
    assert (tmp_path / "concurrency.png").is_file() and "alt='concurrency.png'" in report
    assert "by concurrency" in report and "concurrency=[1,4,16]" not in report
    if wandb:
        files = (tmp_path / "wandb").glob("offline-run-*/files/media/**/*.*")
        media = {p.parent.name + "/" + p.name.split("_")[0] for p in files}
        assert {"plots/concurrency", "plots/steps", "tables/by", "tables/pages", "html/report"} <= media, media


@pytest.mark.parametrize("value", [0, -1, 1.5, "4", "x", True, [], [1, 0], [2, "x"], {"a": 1}])
def test_bad_concurrency_values_are_user_errors(value):
    with pytest.raises(UserError) as e:
        concurrency_levels(value, 16)
    assert "\n" not in str(e.value) and "concurrency=[1,4,16]" in str(e.value)


def test_concurrency_levels():
    assert concurrency_levels(None, 16) == [16] and concurrency_levels(4, 16) == [4]
    assert concurrency_levels([16, 1, 4, 4], 16) == [1, 4, 16]


def test_bad_concurrency_on_the_command_line_is_one_line(tmp_path):
    r = _run("concurrency=[4,0]", f"out={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "concurrency must be a positive integer" in r.stderr.strip().splitlines()[-1]


def test_unreadable_image_is_flagged_not_dropped(tmp_path):
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    Image.new("RGB", (100, 140), "white").save(imgs / "good.png")
    (imgs / "bad.png").write_bytes(b"not an image")
    r = _run("data=images", f"data.root={imgs}", f"out={tmp_path / 'out'}")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["pages"] == 2
    bad = json.loads((tmp_path / "out" / "pages" / "bad.json").read_text())
    assert any("unreadable" in f for f in bad["flags"])


def test_missing_checkpoint_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "treedec", "run", "model.path=/no/such/model", f"out={tmp_path}"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "does not exist" in r.stderr.strip().splitlines()[-1]


def test_root_steps_is_the_layout_streams_share_of_the_critical_path():
    from treedec.engine.page_decoding import PageDecoding
    from treedec.page import Page
    from treedec.records import PageRecord

    def decoded(name, steps, timeline):
        return PageRecord(name, Page(8, 8), "", PageDecoding(name=name, sample=None, steps=steps, timeline=timeline))

    tree = decoded("p", 4, [[0], [0, 1], [1, 2], [2]])
    assert tree.root_steps == 2 and tree.figures()["root_steps"] == 2
    assert decoded("q", 3, [[0], [0], [0]]).root_steps == 3
    assert PageRecord("r", Page(8, 8), "").root_steps == 0  # not decoded
