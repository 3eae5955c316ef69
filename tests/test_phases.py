"""Phase timing of a run: exclusive phases, nested runs as stage 1, cold draft caches."""
import os

from treedec import phases


class FakeTime:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_phases_are_exclusive_and_a_nested_run_is_stage1(monkeypatch):
    t = FakeTime()
    monkeypatch.setattr(phases.time, "perf_counter", t)
    with phases.clock() as (outer, nested):
        assert not nested and phases.nested()
        with outer.phase("draft"):
            t.now += 2.0
            with phases.clock() as (inner, nested_again):  # a run started while drafting (HSD stage 1)
                assert nested_again and inner is not outer
                with inner.phase("decode"):
                    t.now += 3.0
            t.now += 1.0
        t.now += 0.5  # outside every phase: not in the totals, in the span (a run's wall time)
        with outer.phase("decode"):
            t.now += 5.0
        t.now += 4.0  # after the last phase: in neither
    assert not phases.nested()
    assert dict(outer.totals) == {"draft": 3.0, "stage1": 3.0, "decode": 5.0}
    assert outer.span == 11.5 and inner.span == 3.0


def test_cold_drafts_points_the_cache_at_an_empty_folder_and_restores_it(monkeypatch, tmp_path):
    monkeypatch.setenv(phases.DRAFT_CACHE_ENV, str(tmp_path))
    with phases.cold_drafts() as d:
        assert os.environ[phases.DRAFT_CACHE_ENV] == d != str(tmp_path)
        assert os.path.isdir(d) and not os.listdir(d)
    assert os.environ[phases.DRAFT_CACHE_ENV] == str(tmp_path) and not os.path.exists(d)
    with phases.cold_drafts(False) as d:
        assert d is None and os.environ[phases.DRAFT_CACHE_ENV] == str(tmp_path)
    monkeypatch.delenv(phases.DRAFT_CACHE_ENV)
    with phases.cold_drafts():
        pass
    assert phases.DRAFT_CACHE_ENV not in os.environ
