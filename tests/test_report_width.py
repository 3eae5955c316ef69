"""Reports as a person sees them, in headless Chromium at a laptop's width (1280 px): a real
`run` report (strategy beside its baseline, phases, two concurrency levels, pages drawn,
per-page table), a `compare` page of two sweeps with long swept keys, and `evaluate`'s report
have no horizontal scroll (wide tables scroll in their own box), and every plot is shown at
no less than 80% of its own width (no 6-px axis text)."""
import json

import pytest

from browser_helpers import browser, measure
from cli_helpers import treedec_here
from conftest import DEMO

WIDTH = 1280
LEGIBLE = 0.8  # the least share of a plot's own width it may be shown at


def _treedec(*args):
    r = treedec_here(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    browser()  # skip before decoding anything when there is no browser
    out = tmp_path_factory.mktemp("run")
    _treedec("run", "strategy=padoc", "compare=sequential", "data.pages=3", "concurrency=[1,3]", "timelines=2",
             "report_pages=2", "runtime.threads=1", f"out={out}")
    return out


def _assert_fits(html_file):
    m = measure(html_file, WIDTH)
    assert m["scroll_width"] <= m["width"] and not m["outside"], m
    for im in m["images"]:
        assert im["natural"] > 0 and im["shown"] >= LEGIBLE * min(im["natural"], m["width"] - 64), im
    return m


def test_run_report_fits_a_laptop_screen(run_dir):
    m = _assert_fits(run_dir / "report.html")
    alts = [im["alt"] for im in m["images"]]
    assert {"steps_hist.png", "timelines.png", "concurrency.png"} <= set(alts), alts


def test_compare_page_fits_a_laptop_screen(run_dir, tmp_path):
    summary = json.loads((run_dir / "summary.json").read_text())
    inputs = json.loads((run_dir / "result.json").read_text())["inputs"]
    for sweep, pages in (("a", 3), ("b", 16)):
        for strategy in ("sequential", "padoc", "padoc_rows", "hpd"):
            for knob in ("0.25", "0.5"):
                job = tmp_path / sweep / f"{strategy},{knob}"
                job.mkdir(parents=True)
                overrides = [f"strategy={strategy}", f"strategy.some_rather_long_option_name={knob}",
                             f"data.page.preset=v2_with_a_long_name_{knob}"]
                (job / "result.json").write_text(json.dumps(
                    {"key": f"{sweep}{strategy}{knob}", "overrides": overrides, "inputs": inputs,
                     "summary": {**summary, "strategy": strategy, "pages": pages,
                                 "acceptance_by_depth": [0.6, 0.38, 0.33, 0.28, 0.25, 0.22]}}))
    _treedec("compare", f"runs=[{tmp_path / 'a'},{tmp_path / 'b'}]", f"out={tmp_path / 'cmp'}")
    m = _assert_fits(tmp_path / "cmp" / "report.html")
    assert [im["alt"] for im in m["images"]] == ["compare.png"]


def test_evaluate_report_fits_a_laptop_screen(tmp_path):
    browser()
    if not (DEMO / "OmniDocBench_demo.json").is_file():
        pytest.skip("../shared/omnidocbench_demo is absent")
    _treedec("evaluate", f"pred={DEMO / 'predictions_md'}", f"gt={DEMO / 'OmniDocBench_demo.json'}",
             f"out={tmp_path}")
    _assert_fits(tmp_path / "report.html")
