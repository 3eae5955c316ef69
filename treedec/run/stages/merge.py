"""Several runs of one strategy's stages as one run: the wall time is the stages' clock's span,
phases add up to it (each stage's run timed as its phase, the page decode's own phases kept),
forward passes and notes summed, and where drafts came from said once."""
from __future__ import annotations

from treedec.records import RunResult
from treedec.run.phases import PhaseClock


MAIN = "main"  # the clock's phase around the page decode's run: replaced by that run's own phases


def merged(main: RunResult, clock: PhaseClock, stages: list[RunResult], before_s: float,
           drafts: str | None = None) -> RunResult:
    """`main` (the page decode's run, timed in `clock` as its phase `MAIN`) with the other
    `stages`' runs (timed in `clock` under their own phases, or in "decode") folded in: phases are
    `clock`'s with `MAIN` replaced by `main`'s own phases (what of `MAIN` is not in `main`'s wall
    time counts as "decode"); `before_s`: what every page waited for before `main` started, added."""
    phases = {k: v for k, v in clock.totals.items() if k != MAIN}
    phases["decode"] = phases.get("decode", 0.0) + clock.totals.get(MAIN, 0.0) - main.wall_s
    for k, v in main.phases.items():
        phases[k] = phases.get(k, 0.0) + v
    notes = list(dict.fromkeys(n for r in [*stages, main] for n in r.notes))
    main.wall_s, main.phases, main.notes = clock.span, phases, notes
    main.forward_passes += sum(r.forward_passes for r in stages)
    for r in stages:  # the cost model's counts: every stage's passes (HSD's stage 1, the crops' reads)
        if r.forwards is not None:
            if main.forwards is None:
                main.forwards = type(r.forwards)()
            main.forwards += r.forwards
    main.before_s += before_s
    main.drafts = drafts
    return main


def moved(phases: dict[str, float], seconds: float, source: str, target: str) -> None:
    """`seconds` of phase `source` counted as phase `target` (drafting waited for inside a
    stage's run: its phase "draft", not the run's)."""
    seconds = min(seconds, phases.get(source, 0.0))
    phases[source] = phases.get(source, 0.0) - seconds
    phases[target] = phases.get(target, 0.0) + seconds
