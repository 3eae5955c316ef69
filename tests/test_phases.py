"""Phase timing of a run: exclusive phases; a strategy's stages, each one `runtime.run`,
merged into one run whose phases add up to its wall time; cold drafts from an empty folder of
their own (no environment switch, no clock shared between runs)."""
import os

from PIL import Image

from treedec.run import phases
from treedec.data.sample import Sample
from treedec.drafters.page_drafts import SequenceDrafter
from treedec.engine.limits import PageLimits
from treedec.engine.page_decoding import PageDecoding
from treedec.page import Page
from treedec.records import PageRecord, RunResult
from treedec.run.stages import run_strategy
from treedec.run.stages.in_flight import UNKNOWN_PER_PAGE
from treedec.strategies.base import Strategy
from treedec.strategies.sequential import flat_target
from treedec.strategies.stages import Drafted

from engine_helpers import TOK


class FakeTime:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_phases_are_exclusive(monkeypatch):
    t = FakeTime()
    monkeypatch.setattr(phases.time, "perf_counter", t)
    clock = phases.PhaseClock()
    with clock.phase("decode"):
        with clock.phase("draft"):
            t.now += 2.0
            with clock.phase("stage1"):
                t.now += 3.0
            t.now += 1.0
        t.now += 0.5
    t.now += 4.0  # after the last phase: in neither
    with clock.phase("write"):
        t.now += 1.0
    assert dict(clock.totals) == {"draft": 3.0, "stage1": 3.0, "decode": 0.5, "write": 1.0}
    assert clock.span == 11.5


class FakeRuntime:
    """Each run takes 1 s of the fake clock, 2 steps a page, 3 forwards; it records what it ran."""
    name, pending_inputs, steps_counted = "fake", True, "steps"

    def __init__(self, t: FakeTime, max_pages: int = 16):
        self.t, self.runs, self.in_flight = t, [], []
        self.cfg = PageLimits(max_pages=max_pages)

    def check(self, vlm, strategy) -> None:
        pass

    def run(self, vlm, strategy, samples, progress=True, warmup=True, on_record=None, in_flight=None, unit="page"):
        names = [s.name for s in samples if s is not None]
        self.runs.append((strategy.name, names))
        self.in_flight.append(in_flight)
        if strategy.drafter is not None:  # the run's own source, handed its samples' drafts first
            assert strategy.made_for_run and sorted(strategy.drafter.seqs) == sorted(names)
        self.t.now += 1.0
        records = [PageRecord(n, Page(1, 1), "", PageDecoding(name=n, sample=None, steps=2)) for n in names]
        for rec in records:
            if on_record:
                on_record(rec)
        return RunResult(strategy.name, records, 1.0, 3, phases={"load": 0.25, "decode": 0.75}, runtime=self.name,
                         notes=[f"{strategy.name} ran"])


class TwoCrops:
    strategy = Strategy("reads", "crop", TOK, flat_target, drafter=SequenceDrafter())

    def crops(self, vlm, d):
        return [(Sample(f"{d.sample.name}#{k}", None, None), [[TOK.eos_id]]) for k in range(2)]


class FakeBefore:
    """Drafts every page (0.5 s of the fake clock each), stage 1: two crops a page."""
    cache_dir, beside = None, False

    def __init__(self, t: FakeTime):
        self.t, self.folders = t, []

    def drafted(self, vlm, samples, cache_dir, beside, progress):
        assert os.path.isdir(cache_dir) and not os.listdir(cache_dir)  # cold: an empty folder of the run's own
        self.folders.append(cache_dir)
        for s in samples:
            self.t.now += 0.5
            yield Drafted(s, Page(1, 1))

    def stage1(self, vlm):
        return TwoCrops()

    def use(self, vlm, d, readings, source):
        return {"stage1_steps": max(r.steps for r in readings), "stage1_crops": len(readings)}


def test_stages_are_one_run_each_merged_into_one(monkeypatch):
    t = FakeTime()
    monkeypatch.setattr(phases.time, "perf_counter", t)
    env = os.environ.get("TREEDEC_DRAFT_CACHE")
    runtime, before = FakeRuntime(t), FakeBefore(t)
    strategy = Strategy("pages", "flat", TOK, flat_target, before=before)
    samples = [Sample(f"p{i}", None, None) for i in range(3)]
    written = []
    res = run_strategy(runtime, None, strategy, samples, progress=False, warmup=False, on_record=written.append)
    assert runtime.runs == [("reads", [f"p{i}#{k}" for i in range(3) for k in range(2)]),  # stage 1: one run
                            ("pages", ["p0", "p1", "p2"])]  # the pages: one run, without the stages
    assert [r.steps for r in res.records] == [4, 4, 4]  # stage 1's steps on each page's path
    assert written == res.records and all(r.extra["stage1_crops"] == 2 for r in written)
    assert res.forward_passes == 6 and res.notes == ["reads ran", "pages ran"]
    assert res.phases == {"draft": 1.5, "stage1": 1.0, "load": 0.25, "decode": 0.75}
    assert res.wall_s == 3.5 == sum(res.phases.values()) and res.before_s == 2.5
    assert res.drafts == "cold (empty cache)" and not os.path.exists(before.folders[0])
    assert os.environ.get("TREEDEC_DRAFT_CACHE") == env  # no environment switch


def test_the_warm_up_runs_every_stage_with_drafts_of_its_own(monkeypatch):
    t = FakeTime()
    monkeypatch.setattr(phases.time, "perf_counter", t)
    runtime, before = FakeRuntime(t), FakeBefore(t)
    strategy = Strategy("pages", "flat", TOK, flat_target, before=before)
    samples = [Sample(f"p{i}", None, Image.new("RGB", (8, 8))) for i in range(2)]
    res = run_strategy(runtime, None, strategy, samples, progress=False)
    assert [n for n, _ in runtime.runs] == ["reads", "pages", "reads", "pages"]
    assert runtime.runs[1][1] == ["p0"] and res.warmup_s == 2.5
    assert len(before.folders) == 2 and before.folders[0] != before.folders[1]


def test_stage1_holds_a_page_s_crops_in_flight_together(monkeypatch):
    """At one page in flight stage 1 reads that page's crops together (two a page here), as `crops`
    does; the page decode keeps the runtime's pages in flight. Drafted beside the model's runs, the
    crops' count is not known ahead: `UNKNOWN_PER_PAGE` a page."""
    samples = [Sample(f"p{i}", None, None) for i in range(3)]
    for max_pages, beside, crops in ((1, False, 2), (3, False, 6), (2, True, 2 * UNKNOWN_PER_PAGE)):
        t = FakeTime()
        monkeypatch.setattr(phases.time, "perf_counter", t)
        runtime, before = FakeRuntime(t, max_pages), FakeBefore(t)
        before.beside = beside
        run_strategy(runtime, None, Strategy("pages", "flat", TOK, flat_target, before=before), samples,
                     progress=False, warmup=False)
        assert [n for n, _ in runtime.runs] == ["reads", "pages"]
        assert runtime.in_flight == [crops, None], (max_pages, beside)
