"""Every sweep of experiments/sweeps/ is one valid command line: each of its jobs composes
(strategies, keys and values exist) before anyone spends hours on it."""

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import ROOT, load_script, write_tiktoken
from treedec.cli import validate
from treedec.conf import register_schemas

sweep = load_script("experiments/sweep.py")


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "experiments" / "sweeps").glob("*.yaml")))
def test_every_job_of_every_sweep_composes(name):
    register_schemas()
    *runs, compare = sweep.command_lines(name, [])
    assert compare[3] == "compare"
    outs = {o for run in runs for o in run if o.startswith("out=")}
    assert len(outs) == 1 and compare[4] == "runs=" + outs.pop()[4:]  # groups share one store, one table
    jobs = []
    for run in runs:
        command, overrides = run[3], [o for o in run[5:] if not o.startswith(("out=", "hydra."))]
        assert run[4] == "-m"
        jobs += [(command, j) for b in BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides),
                                                                     None) for j in b]
    assert len(jobs) >= 2
    for command, job in jobs:
        validate(command, job, multirun=False)
    if len(runs) > 1:  # each group in its own subfolder of the store: no two jobs share a folder
        assert len({next(o for o in run if o.startswith("hydra.sweep.subdir=")) for run in runs}) == len(runs)


TIME_CHOSEN = ("bucket_points", "step_points", "timed_share")  # the cost model's probes: which step buckets it
# times, and in which order, follows the run's measured seconds a bucket (`cost_model.timed_buckets`), so two runs of
# the same pages may probe different ones; the counts they are chosen from (`counts`) are compared


def _untimed(obj):
    """`obj` without wall-clock figures (keys in seconds or per second, and their ratios), what
    they chose (`TIME_CHOSEN`) or where it was written, at any depth."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items()
                if k not in ("meta", "sweeps", "throughput_ratio", "p95_ratio", "projection_error", "cpu_share",
                             *TIME_CHOSEN)
                and not k.removesuffix("_vs_baseline").endswith("_s")}
    return [_untimed(v) for v in obj] if isinstance(obj, list) else obj


def test_rerunning_a_sweep_config_repeats_its_pages_and_figures(tmp_path):
    """Seeds everywhere (issue 21.5): the tiny sweep `smoke` (a random VLM; sequential, crops and
    hsd with pipeline drafts from a cold cache) run twice into two stores gives the same pages,
    byte for byte, the same figures and the same compare table, timings aside. The first run is
    the script's `main` (each job in a process of its own, `fresh_process=true`; the commands that
    start them, and compare, in this process); the second runs the script's command lines in this
    process with every job in it too (`fresh_process=false`: jobs that share a process start from
    their seed), so its jobs' keys differ by that key alone. The script itself starts as a script."""
    import json
    import subprocess
    import sys
    from types import SimpleNamespace

    from cli_helpers import treedec_here

    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "sweep.py")], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and any(line.split()[0] == "smoke" for line in r.stdout.splitlines()), r.stderr[-3000:]
    script = load_script("experiments/sweep.py")

    def run_here(cmd, check):  # the script's `subprocess.run(cmd, check=True)`, the command run in this process
        assert cmd[1:3] == ["-m", "treedec"] and check
        r = treedec_here(*cmd[3:])
        assert r.returncode == 0, r.stderr[-3000:]

    script.subprocess = SimpleNamespace(run=run_here)
    script.main(["smoke", f"out={tmp_path / 'a'}"])
    rerun = script.command_lines("smoke", ["fresh_process=false", f"out={tmp_path / 'b'}"])
    for cmd in rerun:
        assert cmd[1:3] == ["-m", "treedec"]
        r = treedec_here(*cmd[3:])  # (the extra key goes to the run line, not to compare's)
        assert r.returncode == 0, r.stderr[-3000:]
    a, b = tmp_path / "a", tmp_path / "b"
    jobs = sorted(str(p.parent.relative_to(a)) for p in a.rglob("result.json"))
    assert len(jobs) == 3 and jobs == sorted(str(p.parent.relative_to(b)) for p in b.rglob("result.json"))
    for job in jobs:
        ra, rb = (json.loads((d / job / "result.json").read_text()) for d in (a, b))
        assert ra["key"] != rb["key"] and _untimed(ra["summary"]) == _untimed(rb["summary"])
        assert ra["inputs"]["config"]["fresh_process"] and not rb["inputs"]["config"]["fresh_process"]
        assert {**ra["inputs"]["config"], "fresh_process": None} == {**rb["inputs"]["config"], "fresh_process": None}
        assert ra["summary"]["median_steps"] > 0
        assert "cost_model" not in ra["summary"]  # opt-in: a default sweep calibrates nothing (probes: test_cost_model)
        pages = sorted(p.name for p in (a / job / "pages").iterdir())
        assert len(pages) == 6
        for name in pages:
            fa, fb = ((d / job / "pages" / name).read_text() for d in (a, b))
            assert fa == fb if not name.endswith(".json") else _untimed(json.loads(fa)) == _untimed(json.loads(fb))
    ca, cb = (json.loads((tmp_path / f"{d}-compare" / "summary.json").read_text()) for d in ("a", "b"))
    assert len(ca["rows"]) == 3 and _untimed(ca) == _untimed(cb)
    hsd = next(r for r in ca["rows"] if r["strategy"] == "hsd")
    assert hsd["median_steps_vs_baseline"] is not None  # against the sweep's sequential job


def test_profile_step_times_and_profiles_an_engine_step_or_refuses_a_bad_probe(tmp_path):
    """experiments/profile_step.py (run on a GPU by device_forced.sh): a forced model's engine step timed and
    profiled, blocked and dense for several pages, dense for one; a malformed probe refused in one line."""
    prof = load_script("experiments/profile_step.py")
    out = tmp_path / "p.txt"
    prof.main(["--size", "1m", "--device", "cpu", "--dtype", "float32", "--probe", "2:3:40", "--probe", "1:1:30",
               "--steps", "1", "--threads", "1", "--out", str(out)])
    text = out.read_text()
    heads = [line for line in text.splitlines() if line.startswith("== ")]
    assert [h.split(":")[0] for h in heads] == ["== 2 pages x 40 keys, 3 rows, blocked", "== 2 pages x 40 keys, 3 rows, dense",
                                                 "== 1 pages x 30 keys, 1 rows, dense"]
    assert all(" ms a step (CPU)" in h for h in heads) and text.count("Self CPU time total") == 3
    for bad in ("2:3", "0:1:5", "3:2:5"):
        with pytest.raises(SystemExit) as e:
            prof.main(["--size", "1m", "--device", "cpu", "--probe", bad])
        assert "--probe" in str(e.value)


def test_profile_step_under_a_bpe_has_its_vocabulary_or_refuses_a_missing_file(tmp_path):
    """profile_step.py --tokenizer: the forced model under that BPE (its LM head has the BPE's rows, which every
    row of the step goes through), named in the profile's first line; a missing file is one line."""
    prof = load_script("experiments/profile_step.py")
    bpe = write_tiktoken(tmp_path / "b.tiktoken", [b"ab", b"cd"])
    out = tmp_path / "p.txt"
    prof.main(["--size", "1m", "--device", "cpu", "--dtype", "float32", "--probe", "1:1:30", "--steps", "1",
               "--threads", "1", "--tokenizer", str(bpe), "--out", str(out)])
    first = out.read_text().splitlines()[0]
    from treedec.models.forced import forced_tokenizer
    tokens = len(forced_tokenizer(str(bpe)))
    assert f"tokenizer {bpe} ({tokens} tokens)" in first and tokens != len(forced_tokenizer(None))
    with pytest.raises(SystemExit) as e:
        prof.main(["--size", "1m", "--device", "cpu", "--tokenizer", str(tmp_path / "none.tiktoken")])
    assert "profile_step.py:" in str(e.value) and "none.tiktoken" in str(e.value)


def test_forced_table_reads_a_sweep_with_ratios_and_each_jobs_time_split(tmp_path):
    """experiments/forced_table.py on a tiny forced sweep (sequential and padoc at one level, with the cost
    model, as `sweeps/forced.yaml` runs): one row a job, ratios to sequential, the level read where it was
    not swept, and each job's wall time split into forwards, the engine's own work and the rest (what the
    GPU call brings back)."""
    import json
    import subprocess
    import sys

    from cli_helpers import treedec_here
    from test_run import PAGES

    out = tmp_path / "sweep"
    r = treedec_here("run", "-m", "model=forced", "model.size=1m", "model.vision_tokens=16", "runtime.threads=1",
                     "runtime.max_pages=4", "data.pages=2", *PAGES, "strategy=sequential,padoc", "cost_model=true",
                     "fresh_process=false",  # the jobs in this process: the table reads their figures, not how
                     f"out={out}")  # they were isolated
    assert r.returncode == 0, r.stderr[-2000:]
    table = load_script("experiments/forced_table.py")
    rows = {row["strategy"]: row for row in table.rows_of("1m", str(out))}
    assert set(rows) == {"sequential", "padoc"} and all(row["in_flight"] == 4 for row in rows.values())
    seq, padoc = rows["sequential"], rows["padoc"]
    assert seq["pages_per_s_vs_sequential"] == 1.0
    assert padoc["mean_steps_vs_sequential"] == seq["mean_steps"] / padoc["mean_steps"] > 1
    for row in rows.values():
        assert row["steps"] > 0 and row["forward_s"] > 0 and row["engine_s"] > 0
        assert abs(row["forward_s"] + row["engine_s"] + row["other_s"] - row["wall_s"]) < 1e-6 * row["wall_s"] + 1e-9
        assert 0 < row["forward_ms_per_step"] * row["steps"] / 1e3 <= row["forward_s"] * (1 + 1e-9)
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "forced_table.py"), "--sweep", f"1m={out}",
                        "--out", str(tmp_path / "t")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(json.loads((tmp_path / "t" / "forced_table.json").read_text())["rows"]) == 2
    assert (tmp_path / "t" / "forced_table.png").stat().st_size > 0


def test_break_even_crossing_is_where_a_ratio_crosses_one_between_sizes():
    """break_even.py's break-even (with and without the vision encoder): the size where a projected ratio to
    sequential crosses 1, log-interpolated between the two sizes around it; none where it never crosses."""
    be = load_script("experiments/break_even.py")
    at = be.crossing([(1e8, 0.9), (1e9, 1.1)])  # halfway in log: sqrt(1e8 x 1e9)
    assert at == pytest.approx(10 ** 8.5)
    assert be.crossing([(1e8, 1.2), (1e9, 0.8)]) == pytest.approx(10 ** 8.5)
    assert be.crossing([(1e8, 0.5), (2e8, 0.7), (4e8, 1.3)]) == pytest.approx(2e8 * 2 ** 0.5)
    assert be.crossing([(1e8, 1.4), (1e9, 2.5)]) is None and be.crossing([(1e8, 0.9)]) is None


def test_profile_shares_splits_a_profile_into_attention_gather_and_matmuls(tmp_path):
    """experiments/profile_shares.py: a cProfile of page-blocked attention and a linear layer, split into its
    parts; the gather is index_select under `_gather` only (the query rows' index_select is 'other'), the
    parts sum to the profile's total; a file that is not a profile is one line."""
    import cProfile

    import torch

    from treedec.models.page_attention import PageBatch, blocked_attention

    shares_script = load_script("experiments/profile_shares.py")
    q, kv = torch.randn(1, 4, 3, 8), torch.randn(40, 2, 8).transpose(0, 1)[None]  # token-major, like the arena
    groups = [(torch.tensor([0, 1]), torch.arange(0, 20), torch.zeros(2, 20)),
              (torch.tensor([2]), torch.arange(20, 40), torch.zeros(1, 20))]
    pages, w = PageBatch.build(groups, ratio=0.0), torch.randn(64, 8)
    out = tmp_path / "run.prof"
    with cProfile.Profile() as prof:
        for _ in range(20):
            blocked_attention(q, kv, kv, pages, scale=0.3)
            torch.nn.functional.linear(q, w)
    prof.dump_stats(out)
    s = shares_script.shares(out)
    assert min(s["attention kernel"], s["KV gather"], s["weights' matmuls"], s["other"]) > 0
    assert sum(s[p] for p in shares_script.PARTS) == pytest.approx(s["total"])
    assert s[shares_script.CALIBRATION] == 0
    table = shares_script.table([out])
    assert table.splitlines()[0] == "| part | run |" and "| KV gather | " in table
    bad = tmp_path / "bad.prof"
    bad.write_text("not a profile")
    with pytest.raises(SystemExit) as e:
        shares_script.main([str(bad)])
    assert "profile_shares.py: not a cProfile output" in str(e.value)


def test_formats_steps_measures_a_two_stage_format_against_its_crops_job_and_counts_pages_unlike_it(tmp_path):
    """experiments/formats_steps.py on hand-written stores: a two-stage format's jobs (mineru) against its
    crops job, a one-pass format's (treedec, crops included) against sequential, each in its own store;
    a page unlike the baseline's is counted out, and a job whose store has no baseline has no ratio
    and no page count (not its own pages counted as equal)."""
    import json

    steps = load_script("experiments/formats_steps.py")

    def job(store, fmt, strategy, median, pages):
        folder = tmp_path / store / f"model.format={fmt},strategy={strategy}"
        (folder / "pages").mkdir(parents=True)
        for name, text in pages.items():
            (folder / "pages" / f"{name}.md").write_text(text, encoding="utf-8")
        summary = {"strategy": strategy, "pages": len(pages), "median_steps": median, "mean_steps": 2 * median,
                   "text_edit_vs_truth": 0.0, "pages_flagged": 0}
        (folder / "result.json").write_text(json.dumps({"key": f"{store}-{fmt}-{strategy}", "summary": summary,
                                                        "overrides": [f"model.format={fmt}", f"strategy={strategy}"]}))

    job("one", "mineru", "hsd", 25, {"a": "x", "b": "z"})
    job("one", "mineru", "crops", 100, {"a": "x", "b": "y"})
    job("one", "treedec", "crops", 200, {"a": "x", "b": "y"})
    job("one", "treedec", "sequential", 400, {"a": "x", "b": "y"})
    job("two", "paddleocr", "hsd", 50, {"a": "x", "b": "y"})
    rows = steps.rows_of([str(tmp_path / "one"), str(tmp_path / "two")])
    assert [(r["format"], r["strategy"], r["baseline"]) for r in rows] == [
        ("treedec", "sequential", "sequential"), ("treedec", "crops", "sequential"),
        ("mineru", "crops", "crops"), ("mineru", "hsd", "crops"), ("paddleocr", "hsd", "crops")]
    by = {(r["format"], r["strategy"]): r for r in rows}
    assert by["mineru", "hsd"]["median_steps_x"] == 4.0 and by["mineru", "hsd"]["pages_as_baseline"] == 1
    assert by["mineru", "crops"]["median_steps_x"] == 1.0 and by["mineru", "crops"]["pages_as_baseline"] == 2
    assert by["treedec", "crops"]["median_steps_x"] == 2.0 and by["treedec", "crops"]["pages_as_baseline"] == 2
    assert by["paddleocr", "hsd"]["median_steps_x"] is None and by["paddleocr", "hsd"]["pages_as_baseline"] is None
    assert "| mineru | hsd | 25 | 50 | 4.00 / 4.00 |" in steps.markdown(rows) and "| -/2 |" in steps.markdown(rows)
