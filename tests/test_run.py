"""`python -m treedec run` end to end on a random tiny model: outputs, ratios, flags."""
import json
import subprocess
import sys

from PIL import Image

from conftest import ROOT

TINY = ["model=random", "model.spec.image_size=128", "model.spec.text_layers=1", "model.spec.vision_layers=1",
        "model.spec.vision_hidden=64", "model.spec.vision_heads=1", "model.spec.text_hidden=64", "model.spec.head_dim=32",
        "runtime.max_new_tokens=12"]


def _run(*args):
    r = subprocess.run([sys.executable, "-m", "treedec", "run", *TINY, *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=600)
    return r


def test_run_writes_the_outputs_contract(tmp_path):
    r = _run("data.pages=2", "data.page.width=128", "data.page.height=128", "data.page.cell=[8,8]",
             "data.page.margin=1", "compare=sequential", f"out={tmp_path}")
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
    assert "steps_ratio" in (tmp_path / "report.html").read_text()


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
