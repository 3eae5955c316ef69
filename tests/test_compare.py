"""`compare` on stored results alone: swept keys as columns, each job against the baseline of
its own sweep (same other swept keys), a run's in-process baseline, user errors."""
import pytest
from bs4 import BeautifulSoup
from omegaconf import OmegaConf

from treedec.commands.compare import load_jobs, markdown, table
from treedec.commands.compare import main as compare
from treedec.errors import UserError
from treedec.results.store import write_atomic
from treedec.run.outputs import RunOutput


def _job(root, overrides, **summary):
    name = ",".join(overrides)
    write_atomic(root / name / "result.json", {"key": name, "overrides": overrides, "summary": summary})


@pytest.fixture
def sweeps(tmp_path):
    a = tmp_path / "a"
    for strategy, steps in (("sequential", 100.0), ("padoc", 50.0)):
        for pages in (2, 4):
            _job(a, [f"strategy={strategy}", f"data.pages={pages}", "out=x"], strategy=strategy,
                 median_steps=steps * pages, pages_per_s=10.0 / steps, text_edit=0.1)
    b = tmp_path / "b"  # one job that carries its own baseline (run compare=sequential)
    _job(b, ["strategy=padoc"], strategy="padoc", median_steps=40.0, text_edit=0.2,
         baseline={"strategy": "sequential", "median_steps": 120.0, "text_edit": 0.25})
    return a, b


def test_each_job_against_its_sweeps_baseline(sweeps):
    a, b = sweeps
    rows, keys, figures = table(load_jobs([str(a), str(b)]), None)
    assert keys == ["sweep", "data.pages"]
    got = {(r["sweep"][-1], r["strategy"], r["data.pages"]): r for r in rows}
    assert len(got) == 5
    pad4 = got[("a", "padoc", "4")]
    assert pad4["median_steps"] == 200 and pad4["median_steps_vs_baseline"] == pytest.approx(2.0)
    assert pad4["pages_per_s_vs_baseline"] == pytest.approx(2.0) and pad4["text_edit_vs_baseline"] == 0
    assert got[("a", "sequential", "2")]["median_steps_vs_baseline"] == 1.0
    inner = got[("b", "padoc", None)]
    assert inner["baseline"] == "same run: sequential" and inner["median_steps_vs_baseline"] == pytest.approx(3.0)
    assert inner["text_edit_vs_baseline"] == pytest.approx(-0.05)
    md = markdown(rows, keys, figures)
    assert md.count("\n") == 2 + 5 and "200 (2.00x)" in md and "| data.pages |" in md


def test_default_baseline_is_each_formats_own(tmp_path):
    """A sweep over formats: a one-pass format's jobs against its sequential, a two-stage
    format's (mineru: crops only) against its crops job, not against another format's."""
    for fmt, strategy, steps in (("markdown", "sequential", 100.0), ("markdown", "hsd", 25.0),
                                 ("mineru", "crops", 80.0), ("mineru", "hsd", 20.0)):
        _job(tmp_path, [f"model.format={fmt}", f"strategy={strategy}", "out=x"], strategy=strategy, format=fmt,
             median_steps=steps)
    rows, keys, _ = table(load_jobs([str(tmp_path)]), None)
    got = {(r["model.format"], r["strategy"]): r for r in rows}
    assert keys == ["model.format"] and len(got) == 4
    assert got[("markdown", "hsd")]["baseline"] == "strategy=sequential"
    assert got[("markdown", "hsd")]["median_steps_vs_baseline"] == pytest.approx(4.0)
    assert got[("mineru", "hsd")]["baseline"] == "strategy=crops"
    assert got[("mineru", "hsd")]["median_steps_vs_baseline"] == pytest.approx(4.0)
    assert got[("mineru", "crops")]["median_steps_vs_baseline"] == 1.0
    named = {(r["model.format"], r["strategy"]): r for r in table(load_jobs([str(tmp_path)]), "sequential")[0]}
    assert named[("mineru", "hsd")]["baseline"] == "-"  # a baseline named by the user: no fallback


def test_explicit_baseline_and_mistakes(sweeps, tmp_path):
    a, _ = sweeps
    rows, _, _ = table(load_jobs([str(a)]), "data.pages:2")
    pad4 = next(r for r in rows if r["strategy"] == "padoc" and r["data.pages"] == "4")
    assert pad4["baseline"] == "data.pages=2" and pad4["median_steps_vs_baseline"] == pytest.approx(0.5)
    assert table(load_jobs([str(a)]), "padoc")[0][0]["baseline"] == "strategy=padoc"
    with pytest.raises(UserError, match="KEY:VALUE"):
        table(load_jobs([str(a)]), ":2")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no finished job"):
        load_jobs([str(tmp_path / "empty")])
    with pytest.raises(UserError, match="is not a folder"):
        load_jobs([str(tmp_path / "nope")])


def test_compare_writes_markdown_html_and_plot(sweeps, tmp_path):
    a, b = sweeps
    out = RunOutput(tmp_path / "out")
    s = compare(OmegaConf.create({"runs": [str(a), str(b)], "baseline": None}), out)
    assert s["jobs"] == 5
    assert (out.dir / "compare.md").read_text().startswith("| sweep | data.pages | strategy | pages | baseline |")
    soup = BeautifulSoup((out.dir / "report.html").read_text(), "html.parser")
    assert str(soup).count("data:image/png;base64,") == 1
    cells = {c.get_text(): c.get("class") for c in soup.find_all("span")}
    # each figure beside its ratio, coloured by direction: fewer steps and more pages/s better, more text edit worse
    assert cells["200 (2.00x)"] == ["better"] and cells["0.1 (+0.000)"] == ["same"] and cells["0.1 (1.00x)"] == ["same"]
    assert cells["40 (3.00x)"] == ["better"] and cells["0.2 (-0.050)"] == ["better"]
    assert "warnings" not in s  # the sweep over data.pages differs in pages on purpose


def test_runs_that_differ_in_pages_seeds_or_weights_are_named_in_one_line(tmp_path, capsys):
    for sweep, pages, seed, weights in (("a", 100, 0, "w1"), ("b", 16, 0, "w1"), ("c", 100, 1, "w2")):
        write_atomic(tmp_path / sweep / "j" / "result.json",
                     {"key": sweep, "overrides": ["strategy=padoc"], "summary": {"strategy": "padoc", "pages": pages},
                      "inputs": {"config": {"seed": seed, "data": {"seed": 7}}, "weights_sha256": weights}})
    out = RunOutput(tmp_path / "out")
    s = compare(OmegaConf.create({"runs": [str(tmp_path / "a"), str(tmp_path / "b")], "baseline": None}), out)
    err = capsys.readouterr().err.strip()
    assert err == s["warnings"][0] and "\n" not in err
    assert "pages: 100, 16" in err and "seeds" not in err and "weights" not in err
    assert "| 100 |" in (out.dir / "compare.md").read_text()  # the pages column
    assert "pages: 100, 16" in (out.dir / "report.html").read_text()  # and at the top of the report
    s = compare(OmegaConf.create({"runs": [str(tmp_path / "a"), str(tmp_path / "c")], "baseline": None}), out)
    assert "seeds (seed/data.seed): 0/7, 1/7" in s["warnings"][0] and "model weights (sha256): w1, w2" in s["warnings"][0]
    capsys.readouterr()
    s = compare(OmegaConf.create({"runs": [str(tmp_path / "a")], "baseline": None}), out)
    assert "warnings" not in s and capsys.readouterr().err == ""


def test_acceptance_by_depth_is_shown_as_it_is(tmp_path):
    _job(tmp_path, ["strategy=sequential"], strategy="sequential", median_steps=100.0)
    _job(tmp_path, ["strategy=hpd"], strategy="hpd", median_steps=40.0, acceptance_by_depth=[0.41, 0.25, None])
    rows, keys, figures = table(load_jobs([str(tmp_path)]), None)
    md = markdown(rows, keys, figures)
    assert md.splitlines()[0].endswith("| accepted by depth |")
    assert "| 0.41/0.25/- |" in md
    assert next(line for line in md.splitlines() if "| sequential |" in line).endswith("|  |")  # none drafted


def test_one_value_spelled_two_ways_is_one_value(tmp_path):
    """A job run on its own (`cold_drafts=false`) beside a sweep's (Hydra writes `cold_drafts=False`):
    the key is not swept and the job finds its sequential baseline."""
    _job(tmp_path, ["strategy=sequential", "cold_drafts=False", "out=a"], strategy="sequential", median_steps=100.0)
    _job(tmp_path, ["strategy=padoc", "cold_drafts=false", "out='a/strategy=padoc,x=1'"], strategy="padoc",
         median_steps=40.0)
    rows, keys, _ = table(load_jobs([str(tmp_path)]), None)
    assert keys == [] and {r["strategy"]: r["median_steps_vs_baseline"] for r in rows} == {"sequential": 1.0,
                                                                                          "padoc": 2.5}
