"""The cost model (treedec/results/cost_model.py, issue 32.4): every pass of a run is logged, crops' and
stage 1's included; rows_per_step counts the rows the steps hold; a run asked for it
(`cost_model=true`) carries a projection of its parts, and which probes a calibration times. How
close the projection comes to the measured pages/s is wall-clock timing, which flakes on a shared
machine: `experiments/bench_cost_model.py` measures it (docs/forced.md, "The cost model")."""
import pytest
import torch

from treedec.run.passes import run_pass
from treedec.results.cost_model import project
from treedec.data import open_dataset
from treedec.engine.forward_log import ForwardLog
from treedec.models.forced import ForcedModel
from treedec.results.speed import speed_figures

SYNTH = {"name": "synth", "pages": 3, "seed": 0, "page": {"width": 256, "height": 256, "regions": [2, 4]}}
STRATEGIES = [{"name": "sequential"}, {"name": "padoc"}, {"name": "crops"}, {"name": "hsd", "drafts": "oracle"}]


def _cfg(**extra):
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        cfg = compose(config_name="run", overrides=["model=forced", "runtime.threads=1", "cold_drafts=false",
                                                    *(f"{k}={v}" for k, v in extra.items())])
    return cfg


@pytest.fixture(scope="module")
def samples():
    return list(open_dataset(SYNTH))


def test_every_pass_is_logged_and_rows_per_step_holds_stage_1(samples):
    vlm = ForcedModel("1m", vision_tokens=16)
    cfg = _cfg(cost_model="false")
    for strategy in ({"name": "crops"}, {"name": "hsd", "drafts": "oracle"}):
        res = run_pass(strategy, vlm, samples, cfg, len(samples), progress=False)
        log = res.forwards
        assert log.steps + log.prefills == res.forward_passes  # the crops' and stage 1's engines included
        # each bucket holds its steps' own forward CPU seconds (beside a probe's, where a projection misses)
        assert sum(log.by_rows_forward_cpu_s.values()) == pytest.approx(log.step_forward_cpu_s)
        assert log.by_rows_forward_cpu_s.keys() == log.by_rows.keys()
        assert log.prefills > len(samples)  # a prefill per crop besides the pages'
        fig = speed_figures(res)
        steps = [r.steps for r in res.records]
        assert fig["rows_per_step"] * sum(steps) == pytest.approx(log.step_rows)
        assert res.projection is None  # cost_model=false: not calibrated
    # HSD's pages' steps count stage 1's; their timelines do not hold its rows, the log does
    timeline_rows = sum(len(t) for r in res.records for t in r.timeline) + sum(r.drafted for r in res.records)
    assert log.step_rows > timeline_rows


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s["name"])
def test_a_run_asked_for_the_cost_model_carries_its_projection(samples, strategy):
    """`cost_model=true`: the run's projection, its parts summing to the projected wall time, the
    probes it timed, and the error against its own measurement; the same counts projected with the
    step costs left out read faster (the step costs are in the projection)."""
    torch.set_num_threads(1)
    vlm = ForcedModel("1m", vision_tokens=16)
    res = run_pass(strategy, vlm, samples, _cfg(cost_model="true"), len(samples), progress=False)
    fig = speed_figures(res)
    cm = fig["cost_model"]
    assert fig["projected_pages_per_s"] > 0 and fig["pages_per_s"] > 0
    assert fig["projection_error"] == pytest.approx(fig["projected_pages_per_s"] / fig["pages_per_s"] - 1)
    assert cm["model_s"] > 0 and cm["model_measured_s"] > 0 and cm["other_s"] >= 0
    assert cm["model_s"] + cm["engine_s"] + cm["other_s"] == pytest.approx(cm["projected_wall_s"])
    assert cm["costs"]["bucket_points"] and all(p["time_s"] > 0 for p in cm["costs"]["bucket_points"])
    assert {p["bucket"] for p in cm["costs"]["bucket_points"]} <= {str(b) for b in res.forwards.by_rows}
    costs = {k: v for k, v in cm["costs"].items() if k == "clock" or "prefill" in k}
    blind = project(res.forwards, costs, len(samples), res.wall_s)["projected_pages_per_s"]
    assert blind > fig["projected_pages_per_s"]


def test_each_engine_logs_to_the_log_its_runtime_hands_it(samples):
    """No module-level log: two engines in one process, one handed a log and one not, each
    records its own passes only (the runtime hands the log: `Runtime.decode(..., log)`)."""
    from treedec.engine import forward_log
    from treedec.engine.engine import Engine, EngineConfig
    from treedec.strategies.base import STRATEGIES

    vlm = ForcedModel("1m", vision_tokens=16)
    strategy = STRATEGIES.get("padoc")(vlm.tokenizer)
    items = [(s.name, vlm.prompt(s.image, strategy.mode), s) for s in samples[:2]]
    logged, unlogged = forward_log.ForwardLog(), Engine(vlm.adapter(), strategy, EngineConfig())
    engine = Engine(vlm.adapter(), strategy, EngineConfig(), log=logged)
    steps = sum(r.steps for r in engine.run(items[:1]))
    list(unlogged.run(items))  # runs after: its passes go nowhere
    assert logged.prefills == 1 and logged.steps == steps - 1 == engine.forward_passes - 1
    assert unlogged.forward_passes > engine.forward_passes and unlogged.log is None
    assert not any(isinstance(v, list) for k, v in vars(forward_log).items() if not k.startswith("__"))


def test_probes_timed_apart_once_per_model(samples):
    """`calibrate(apart=True)` (break_even.py's sizes whose KV arenas do not fit together) builds, times
    and frees each probe alone; with a `memo` shared by calls on one model, a probe is timed once."""
    from treedec.results.cost_model import calibrate
    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(1)
    vlm = ForcedModel("1m", vision_tokens=16)
    res = run_pass({"name": "padoc"}, vlm, samples, _cfg(cost_model="false"), len(samples), progress=False)
    memo, mode = {}, STRATEGIES.get("padoc")(vlm.tokenizer).mode
    first = calibrate(vlm, mode, samples, res.forwards, len(samples), budget_s=0.5, apart=True, memo=memo)
    assert first["bucket_points"] and all(p["time_s"] > 0 for p in first["bucket_points"])
    assert len(first["prefill_points"]) == len(samples) and all(p["time_s"] > 0 for p in first["prefill_points"])
    timed = len(memo)
    again = calibrate(vlm, mode, samples, res.forwards, len(samples), budget_s=0.5, apart=True, memo=memo)
    assert len(memo) == timed and again["bucket_points"] == first["bucket_points"]  # nothing timed again
    assert project(res.forwards, again, len(samples), res.wall_s)["projected_pages_per_s"] > 0
    assert first["timed_apart"]


def test_probes_whose_arenas_do_not_fit_together_are_timed_apart(samples, monkeypatch):
    """A run's calibration times its probes in turn where their KV arenas fit together, and apart
    (each built, timed and freed alone) where they would hold over `ARENAS_TOGETHER` bytes (HSD's 30m
    counts probed at 0.1b: 33 buckets, 23 GB at once)."""
    from treedec.results import cost_model
    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(1)
    vlm = ForcedModel("1m", vision_tokens=16)
    res = run_pass({"name": "padoc"}, vlm, samples, _cfg(cost_model="false"), len(samples), progress=False)
    mode = STRATEGIES.get("padoc")(vlm.tokenizer).mode
    apart = []  # the probes each `_timed_apart` call timed
    timed_apart = cost_model._timed_apart
    monkeypatch.setattr(cost_model, "_timed_apart", lambda makers, *a, **k: apart.append(len(makers))
                        or timed_apart(makers, *a, **k))
    together = cost_model.calibrate(vlm, mode, samples, res.forwards, len(samples), budget_s=0.2)
    assert not together["timed_apart"] and not apart
    monkeypatch.setattr(cost_model, "ARENAS_TOGETHER", 1024)
    alone = cost_model.calibrate(vlm, mode, samples, res.forwards, len(samples), budget_s=0.2)
    assert alone["timed_apart"] and apart == [len(alone["bucket_points"]) + len(alone.get("step_points", []))
                                              + len(alone["prefill_points"])]
    assert [p["bucket"] for p in alone["bucket_points"]] == [p["bucket"] for p in together["bucket_points"]]
    assert all(p["time_s"] > 0 for p in alone["bucket_points"])


def _log(buckets: dict[str, tuple[int, float]]) -> ForwardLog:
    """A log whose bucket "R x 1" has n steps of R rows that took cpu forward seconds: {bucket: (n, cpu)}."""
    log = ForwardLog()
    for b, (n, cpu) in buckets.items():
        rows = int(b.split("x")[0])
        log.by_rows[b] = [n, n, n * rows, n * rows * 100]  # one page, 100 keys a row
        log.by_rows_forward_cpu_s[b] = cpu
        log.steps, log.step_pages, log.step_rows, log.step_attn = (
            x + y for x, y in zip((log.steps, log.step_pages, log.step_rows, log.step_attn), log.by_rows[b]))
        log.step_forward_cpu_s += cpu
        log.step_forward_s += cpu
    return log


CHEAP = {f"{r}x1": (100, 1.0) for r in range(1, 31)}  # 30 buckets of many cheap steps: 30 s
COSTLY = {f"{r}x1": (3, 40.0) for r in range(200, 206)}  # 6 of a few costly ones: 240 s


def test_timed_buckets_hold_most_of_the_step_time():
    """The buckets timed are those that held most of the run's step forwards, not those with the most
    steps: many cheap steps do not crowd out a few costly ones (HSD at 30m: the 8 buckets with the most
    steps held 30-44 % of its step forwards)."""
    from treedec.results.cost_model import TIMED_MAX, TIMED_MIN, TIMED_SHARE, step_share, timed_buckets

    log = _log({**CHEAP, **COSTLY})
    chosen = timed_buckets(log)
    share = step_share(log, chosen)
    assert set(COSTLY) <= set(chosen) and TIMED_MIN <= len(chosen) <= TIMED_MAX
    assert share >= TIMED_SHARE and share == pytest.approx(sum(log.by_rows_forward_cpu_s[b] for b in chosen) / 270)
    by_steps = sorted(log.by_rows, key=lambda b: -log.by_rows[b][0])[:TIMED_MIN]  # the rule it replaced
    assert sum(log.by_rows_forward_cpu_s[b] for b in by_steps) / 270 < 0.1
    # as many as it takes, up to TIMED_MAX: 100 buckets alike
    alike = _log({f"{r}x1": (5, 1.0) for r in range(1, 101)})
    many = timed_buckets(alike)
    assert len(many) == TIMED_MAX and step_share(alike, many) == pytest.approx(TIMED_MAX / 100)
    # a log without the buckets' times (older runs): their rows decide, and no share of times is told
    log.by_rows_forward_cpu_s.clear()
    rows_chosen = timed_buckets(log)
    assert sum(log.by_rows[b][2] for b in rows_chosen) >= TIMED_SHARE * log.step_rows
    assert step_share(log, rows_chosen) is None


def test_calibration_times_the_buckets_that_held_the_step_time():
    """`calibrate` times `timed_buckets`' buckets (the costly few among many cheap ones here) and says
    what share of the run's step forwards they held; each probe's arena holds room for its step's rows,
    so a step writes in place and the arena is the size `ARENAS_TOGETHER` is checked against."""
    from treedec.engine.kv import KVArena
    from treedec.results.cost_model import calibrate, step_probe, timed_buckets

    torch.set_num_threads(1)
    vlm = ForcedModel("1m", vision_tokens=16)
    log = _log({**CHEAP, **COSTLY})
    costs = calibrate(vlm, "flat", [], log, 1, budget_s=0.2)
    assert [p["bucket"] for p in costs["bucket_points"]] == timed_buckets(log)
    assert set(COSTLY) <= {p["bucket"] for p in costs["bucket_points"]} and costs["timed_share"] >= 0.8
    assert all(p["time_s"] > 0 for p in costs["bucket_points"]) and len(costs["step_points"]) == 5
    adapter = vlm.adapter()
    step, _ = step_probe(adapter, 2, 5, 400, 4.0, blocked=False)  # over the first 256 slots
    arena = next(c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, KVArena))
    for _ in range(2):
        step()
    assert {layer._k.shape[0] for layer in arena.cache.layers} == {2 * 400 + 5}  # never grown


def test_a_cold_first_call_is_not_timed_when_probes_are_timed_apart():
    """`_timed_apart` leaves a probe's first call out (a cold call: the arena's and the kernels' first
    touch) unless it is as long as `LONG_S`: a probe whose first call burns 1.5 CPU-s and its later
    ones 0.02 is timed at the later ones (at LONG_S = 1 s, its time was the median of 1.5 and 0.02)."""
    import time

    from treedec.results import cost_model

    calls = []

    def probe():
        end = time.process_time() + (1.5 if not calls else 0.02)
        calls.append(1)
        while time.process_time() < end:
            pass

    (timed, built), = cost_model._timed_apart([lambda: (probe, "built")], torch.device("cpu"), budget_s=0.01)
    assert built == "built" and len(calls) >= 2
    assert timed < 0.1
