"""`run executor=ray` (treedec/cluster) on a local Ray of two CPUs started by the test (never a
cluster the machine lacks): a folder of images decoded by two decoder actors gives each page's
Markdown and OmniDocBench JSON byte for byte as a one-process run, the unreadable page kept
flagged, written into a `file://` URL; a driver killed partway and rerun into the same out= decodes only what its journal
lacks, and a decoder killed with SIGKILL in that rerun is replaced, every page written once;
forced hsd with two drafters and two decoders gives sequential's pages, drafts accepted."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import ROOT, journal_lines, page_files, run_killed_after, treedec
from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.models.vlm import SHIPPED, checkpoint_pages
from treedec.run.remote import JOURNAL_DIR
from treedec.run.resume import FOLDER, JOURNAL

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

FAST = ["runtime.max_new_tokens=48", "runtime.threads=1"]
PAGES = 6  # readable pages, beside one unreadable file
DEMO = Path(__file__).resolve().parents[2] / "shared" / "omnidocbench_demo"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray of two CPUs, its address, and a folder: an unreadable file, then PAGES synthetic PNGs."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    data = tmp_path_factory.mktemp("ray") / "in"
    data.mkdir()
    (data / "a_bad.png").write_bytes(b"not a PNG")
    for s in open_dataset({"name": "synth", "pages": PAGES, "seed": 8000}, model_pages=checkpoint_pages(SHIPPED)):
        s.image.save(data / f"{s.name}.png")
    yield ray.get_runtime_context().gcs_address, data
    ray.shutdown()


def _args(data, out, *extra):
    return ["run", "data=images", f"data.root={data}", f"out={out}", *FAST, *extra]


def _on_ray(address, data, out, *extra):
    return _args(data, out, "executor=ray", f"ray.address={address}", *extra)


def _journal_names(out):
    return [json.loads(ln)["name"] for ln in (out / FOLDER / JOURNAL).read_text().splitlines()]


@pytest.fixture(scope="module")
def one_process(cluster, tmp_path_factory):
    _, data = cluster
    out = tmp_path_factory.mktemp("local") / "out"
    r = treedec(*_args(data, out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_two_decoders_write_the_one_process_pages_byte_for_byte(cluster, one_process, tmp_path):
    """... written by the driver into a filesystem URL standing for a shared mount (`file://`), as
    into any out=."""
    address, data = cluster
    out = tmp_path / "mount" / "out"
    r = treedec(*_on_ray(address, data, f"file://{out}", "ray.decoders=2"), env={"TREEDEC_RUNS": str(tmp_path / "m")},
                here=False)
    assert r.returncode == 0, r.stderr[-2000:]
    whole = page_files(one_process)
    assert len(whole) == 2 * PAGES + 2 and page_files(out) == whole  # the flagged page kept too
    s = json.loads((out / "summary.json").read_text())
    ref = json.loads((one_process / "summary.json").read_text())
    assert s["executor"] == "ray" and s["pages"] == ref["pages"] == PAGES + 1 and s["page_flags"] == ref["page_flags"]
    assert s["actors_replaced"] == 0 and s["pages_redone"] == 0
    (run,) = s["ray"]["passes"]
    assert run["actors_started"] == {"decode": 2} and run["busy_s"]["decode"] > 0 and run["bound_by"] == "decode"
    at_url = sorted(json.loads(p.read_text())["name"] for p in (out / JOURNAL_DIR).iterdir())
    assert at_url == sorted(_journal_names(one_process))


def _decoder_pids() -> set[int]:
    """The processes of the decoder actors of this test's Ray: descendants of this process (its
    Ray's raylet forks the actors' workers) that Ray names after the actor's class; never another
    test worker's Ray."""
    rows = [ln.split(None, 2) for ln in subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True,
                                                       text=True).stdout.splitlines()[1:]]
    parent = {int(r[0]): int(r[1]) for r in rows}
    mine = set()
    for pid in parent:
        p = pid
        while p in parent and p != os.getpid():
            p = parent[p]
        if p == os.getpid():
            mine.add(pid)
    return {int(r[0]) for r in rows if len(r) == 3 and int(r[0]) in mine and "MapBatches(Decoder)" in r[2]}


def test_a_killed_driver_resumes_and_a_killed_decoder_is_replaced_every_page_written_once(cluster, one_process,
                                                                                        tmp_path):
    """The driver killed (SIGKILL) after two pages; rerun into the same out=, one of its two decoders
    killed (SIGKILL) as soon as both are up (with the sitting's pages ahead of them, so that the run
    outlasts Ray's restart): only the pages the journal lacks decoded, the decoder replaced, every
    page written once, equal to the one-process run's."""
    address, data = cluster
    out = tmp_path / "out"
    one_page = ["ray.pages_per_batch=1", "runtime.max_pages=1"]
    killed = run_killed_after(_on_ray(address, data, out, *one_page), 2, journal_lines(out / FOLDER / JOURNAL))
    assert killed.returncode == -9, killed.stderr[-2000:]
    done = _journal_names(out)
    assert len(done) == 2
    cmd = [sys.executable, "-m", "treedec", *_on_ray(address, data, out, "ray.decoders=2", *one_page)]
    earlier = _decoder_pids()  # the killed sitting's decoders, while Ray has not reaped them yet
    driver = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while len(pids := sorted(_decoder_pids() - earlier)) < 2:  # this sitting's two decoders up, its pages ahead
        assert driver.poll() is None and time.monotonic() < deadline, "no decoder actor of this sitting found"
        time.sleep(0.1)
    os.kill(pids[0], signal.SIGKILL)
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["resumed_pages"] == 2 and s["pages_decoded"] == PAGES + 1 - 2  # the unreadable page tried again
    assert s["actors_replaced"] >= 1 and s["ray"]["passes"][0]["actors_replaced"] == s["actors_replaced"]
    names = _journal_names(out)
    assert names[:2] == done and len(names) == len(set(names)) == PAGES  # each readable page marked once
    assert page_files(out) == page_files(one_process)


@pytest.mark.skipif(not DEMO.is_dir(), reason="needs ../shared/omnidocbench_demo")
def test_forced_hsd_on_two_drafters_and_two_decoders_gives_sequentials_pages(cluster, tmp_path):
    pytest.importorskip("rapidocr", reason="the hsd extra (the pipeline drafter) is not installed")
    address, _ = cluster
    forced = ["model=forced", "model.size=1m", "data=omnidocbench", f"data.root={DEMO}", "data.limit=2",
              "runtime.threads=1", "runtime.max_new_tokens=512"]
    base = treedec("run", *forced, "strategy=sequential", f"out={tmp_path / 'seq'}")
    assert base.returncode == 0, base.stderr[-2000:]
    r = treedec("run", *forced, "strategy=hsd", "executor=ray", f"ray.address={address}", "ray.decoders=2",
                "ray.drafters=2", f"out={tmp_path / 'hsd'}", here=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_files(tmp_path / "hsd") == page_files(tmp_path / "seq")
    s = json.loads((tmp_path / "hsd" / "summary.json").read_text())
    assert s["accepted_per_step"] > 1.5 and s["ray"]["passes"][0]["actors_started"] == {"draft": 2, "decode": 2}
    assert s["ray"]["passes"][0]["busy_s"]["draft"] > 0


def test_bad_ray_options_are_one_line_errors():
    from treedec.cluster import make_executor
    from treedec.cluster.options import RayOptions

    with pytest.raises(UserError, match="ray.decoders must be a whole number >= 1"):
        RayOptions.from_cfg({"decoders": 0})
    with pytest.raises(UserError, match="ray has no option"):
        RayOptions.from_cfg({"decoder": 2})
    with pytest.raises(UserError, match="unknown executor 'rey'"):
        make_executor({"executor": "rey"})
