"""The results store: resumable sweeps (a finished job is not rerun, a lost one is), job keys
(config, code, page settings, weights), atomic results, W&B groups, and seeds (the same config
gives the same pages and figures)."""
import json
import shutil

import pytest
from omegaconf import OmegaConf

from cli_helpers import treedec
from test_run import PAGES, TINY
from treedec.results import store

TIMING = {"throughput_ratio", "p95_ratio", "meta", "projection_error", "cpu_share"}  # and every key ending in _s


def _figures(obj):
    """`obj` without its wall-clock figures, at any depth."""
    if isinstance(obj, dict):
        return {k: _figures(v) for k, v in obj.items() if k not in TIMING and not k.endswith("_s")}
    return [_figures(v) for v in obj] if isinstance(obj, list) else obj


def _treedec(*args, env=None):
    """The command in this process; with `env` (W&B's folders) in a process of its own."""
    r = treedec(*args, env=env, here=env is None, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _stamps(root):
    return {p.parent.name: p.stat().st_mtime_ns for p in root.glob("*/summary.json")}


def test_a_sweep_resumes_only_what_is_missing(tmp_path):
    sweep = ["depth", "-m", "strategy=padoc,sequential,padoc_rows", "data.pages=3", f"out={tmp_path}"]
    assert "0 done, 3 to run" in _treedec(*sweep)
    first = _stamps(tmp_path)
    assert len(first) == 3 and len(list(tmp_path.glob("*/result.json"))) == 3
    again = _treedec(*sweep)
    assert "3 done, 0 to run" in again and again.count("done, not rerun") == 3
    assert _stamps(tmp_path) == first  # nothing recomputed
    lost = next(iter(first))
    shutil.rmtree(tmp_path / lost)  # a job's output deleted (or a job killed before its result.json)
    third = _treedec(*sweep)
    assert "2 done, 1 to run" in third and third.count("done, not rerun") == 2
    now = _stamps(tmp_path)
    assert {k: v for k, v in now.items() if k != lost} == {k: v for k, v in first.items() if k != lost}
    assert lost in now
    forced = _treedec(*sweep, "+force=true")
    assert "done, not rerun" not in forced
    assert all(_stamps(tmp_path)[k] > now[k] for k in now)
    # compare reads the store alone: one row per job, padoc against the sweep's sequential job
    out = tmp_path.parent / "compare"
    _treedec("compare", f"runs={tmp_path}", f"out={out}")
    s = json.loads((out / "summary.json").read_text())
    rows = {r["strategy"]: r for r in s["rows"]}
    assert set(rows) == {"padoc", "sequential", "padoc_rows"} and s["swept_keys"] == []
    pad = rows["padoc"]
    assert pad["baseline"] == "strategy=sequential"
    assert pad["median_fork_depth_vs_baseline"] == pytest.approx(rows["sequential"]["median_fork_depth"] /
                                                                 pad["median_fork_depth"])
    assert "| padoc | 3 | strategy=sequential |" in (out / "compare.md").read_text()  # strategy, pages, baseline
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_run_sweep_is_seeded_and_resumes(tmp_path):
    """The same config twice (two folders) gives the same pages and the same figures, timings
    aside; rerun into the same folder, nothing is decoded. Every job in the sweep's process
    (fresh_process=false: jobs that share a process start from their seed; a process a job, the
    default: tests/test_experiments.py's rerun of the smoke sweep)."""
    sweep = ["run", "-m", *TINY, *PAGES, "strategy=padoc,sequential", "data.pages=2", "fresh_process=false"]
    a, b = tmp_path / "a", tmp_path / "b"
    _treedec(*sweep, f"out={a}")
    _treedec(*sweep, f"out={b}")
    jobs = sorted(p.parent.name for p in a.glob("*/result.json"))
    assert len(jobs) == 2 and jobs == sorted(p.parent.name for p in b.glob("*/result.json"))
    for job in jobs:
        ra, rb = (json.loads((d / job / "result.json").read_text()) for d in (a, b))
        assert ra["key"] == rb["key"]
        assert _figures(ra["summary"]) == _figures(rb["summary"])
        assert ra["summary"]["median_steps"] and ra["summary"]["text_edit"] is not None
        pages = sorted(p.name for p in (a / job / "pages").iterdir())
        assert len(pages) == 6
        for name in pages:
            fa, fb = ((d / job / "pages" / name).read_text() for d in (a, b))
            assert fa == fb if name.endswith(".md") else _figures(json.loads(fa)) == _figures(json.loads(fb)), name
    assert "2 done, 0 to run" in _treedec(*sweep, f"out={a}")


def test_wandb_one_group_per_sweep_one_run_per_job(tmp_path):
    pytest.importorskip("wandb")
    home = tmp_path / "wandb-home"
    env = {f"WANDB_{d}_DIR": str(home) for d in ("CONFIG", "CACHE", "DATA")} | {"WANDB_SILENT": "true"}
    out = tmp_path / "sweep-x"
    _treedec("depth", "-m", "strategy=padoc,sequential", "data.pages=2", "logger=wandb", f"out={out}", env=env)
    runs = sorted(out.glob("*/wandb/offline-run-*/run-*.wandb"))
    assert len(runs) == 2 and runs[0].parent.parent.parent != runs[1].parent.parent.parent
    for r in runs:
        data = r.read_bytes()
        assert b"sweep-x" in data  # the group: the sweep's folder name
        assert r.parent.parent.parent.name.encode() in data  # the run's name: the job's overrides


def _cfg(**kw):
    base = {"command": "run", "seed": 0, "out": "x", "model": {"name": "tiny", "path": None},
            "data": {"name": "synth", "pages": 2, "seed": 1_000_000, "page": {}}, "strategy": {"name": "padoc"}}
    return {**base, **kw}


def test_key_follows_weights_config_and_pages_not_where_results_go(tmp_path):
    from treedec.models.vlm import SHIPPED

    model = tmp_path / "model"
    shutil.copytree(SHIPPED, model)
    cfg = _cfg(model={"name": "tiny", "path": str(model)})
    key = store.job_key(store.key_inputs(cfg, "run"))
    assert store.job_key(store.key_inputs({**cfg, "out": "elsewhere", "force": True, "logger": {"name": "wandb"}},
                                          "run")) == key
    assert store.job_key(store.key_inputs(_cfg(model={"name": "tiny", "path": str(model)}, seed=1), "run")) != key
    with (model / "model.safetensors").open("r+b") as f:  # the same config, other weights
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    assert store.job_key(store.key_inputs(cfg, "run")) != key
    assert store.key_inputs(_cfg(), "run")["weights_sha256"]  # model.path null: the shipped model's files


@pytest.mark.parametrize("model", [{"name": "tiny", "path": None}, {"name": "random", "path": None,
                                                                  "spec": {"image_size": 128}}])
def test_effective_pages_are_the_pages_run_generates(model):
    from dataclasses import asdict

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm

    cfg = _cfg(model=model, data={"name": "synth", "pages": 2, "seed": 1_000_000, "page": {"margin": 1}})
    used = open_dataset(OmegaConf.create(cfg["data"]), model_pages=load_vlm(OmegaConf.create(model)).pages).config
    assert store.effective_pages(cfg) == asdict(used)
    assert store.effective_pages(cfg)["margin"] == 1


def test_results_are_written_atomically(tmp_path):
    path = tmp_path / "result.json"
    store.write_atomic(path, {"key": "k", "summary": {}})

    class Boom:
        def __str__(self):
            raise RuntimeError("killed half-way")

    with pytest.raises(RuntimeError):
        store.write_atomic(path, {"key": "k2", "summary": {"x": Boom()}})
    assert json.loads(path.read_text())["key"] == "k"  # the old result, whole
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left
    (tmp_path / "job2").mkdir()
    (tmp_path / "job2" / "result.json").write_text('{"key": "half')  # written by something else, cut
    assert store.done_keys(tmp_path) == {"k": tmp_path}
