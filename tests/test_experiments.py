"""Every sweep of experiments/sweeps/ is one valid command line: each of its jobs composes
(strategies, keys and values exist) before anyone spends hours on it."""
import importlib.util

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import ROOT
from treedec.cli import validate
from treedec.conf import register_schemas

spec = importlib.util.spec_from_file_location("sweep", ROOT / "experiments" / "sweep.py")
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "experiments" / "sweeps").glob("*.yaml")))
def test_every_job_of_every_sweep_composes(name):
    register_schemas()
    run, compare = sweep.command_lines(name, [])
    command, overrides = run[3], [o for o in run[5:] if not o.startswith("out=")]
    assert run[4] == "-m" and compare[3] == "compare"
    jobs = [j for b in BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), None) for j in b]
    assert len(jobs) >= 2
    for job in jobs:
        validate(command, job, multirun=False)
