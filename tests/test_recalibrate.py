"""experiments/recalibrate.py: a finished job's counts timed again in a later process from its folder
(experiments/reproject.py, experiments/break_even.py), with the job's own model or another size:
the same buckets the run timed, each probed, and a larger model's probes cost more."""

import pytest
import torch

from treedec.engine.forward_log import ForwardLog
from treedec.results.cost_model import project

from cli_helpers import treedec_here
from conftest import load_script
from test_run import PAGES

_script = load_script("experiments/recalibrate.py")
load_job_model, read_job, recalibrate = _script.load_job_model, _script.read_job, _script.recalibrate

FORCED = ["model=forced", "model.size=1m", "model.vision_tokens=16", "runtime.threads=1", "data.pages=2"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("job")
    r = treedec_here("run", *FORCED, "strategy=padoc", "cost_model=true", *PAGES, f"out={out}")
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_a_job_is_timed_again_from_its_folder_at_its_size_and_another(job):
    summary, cfg = read_job(job)
    cm = summary["cost_model"]
    run_buckets = [p["bucket"] for p in cm["costs"]["bucket_points"]]
    assert run_buckets
    log, times = ForwardLog(**cm["counts"]), {}
    for size in (None, "30m"):
        torch.set_num_threads(2)
        vlm, samples = load_job_model(cfg, size)
        assert torch.get_num_threads() == 1  # set as the job ran (runtime.threads=1)
        assert vlm.size == (size or "1m") and len(samples) == summary["pages"]
        costs = recalibrate(vlm, samples, cfg, log, summary["concurrency"], budget_s=0.5)
        points = costs["bucket_points"]
        assert [p["bucket"] for p in points] == run_buckets and all(p["time_s"] > 0 for p in points)
        assert project(log, costs, summary["pages"], cm["wall_s"])["projected_pages_per_s"] > 0
        times[size] = sum(p["time_s"] for p in points)
    assert times["30m"] > 2 * times[None]  # 30x the parameters: the probes do see the size


def test_a_job_is_timed_on_another_device_or_dtype_with_overrides(job):
    """break_even.py --device/--dtype/--data-root: the job's config with those keys replaced (model and
    data keys alike), the rest as the job ran."""
    summary, cfg = read_job(job)
    vlm, samples = load_job_model(cfg, None, {"model": {"dtype": "bfloat16", "device": "cpu"}, "data": {"pages": 1}})
    assert next(vlm.model.parameters()).dtype == torch.bfloat16 and vlm.size == "1m"
    assert len(samples) == 1 < summary["pages"] and cfg.model.dtype != "bfloat16"  # the job's own config untouched
    costs = recalibrate(vlm, samples, cfg, ForwardLog(**summary["cost_model"]["counts"]), summary["concurrency"],
                        budget_s=0.3)
    assert costs["bucket_points"] and all(p["time_s"] > 0 for p in costs["bucket_points"])
