"""`out=` as a filesystem URL (treedec/run/remote.py): a run into `file://` of a folder standing for a
shared mount writes there the pages a local run writes, byte for byte, each page's files before
its journal entry; a sitting killed after one page and started again from an empty mirror (another
machine) resumes from what the URL holds; `compare runs=URL` reads the run's result; `resume=false`
empties the URL's earlier pages; an unknown protocol is one line."""
import json
import shutil

import pytest

from cli_helpers import journal_objects, page_files, run_killed_after, treedec
from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.models.vlm import SHIPPED, checkpoint_pages
from treedec.run.remote import JOURNAL_DIR, RemoteOut, is_url, mirror_of

FAST = ["runtime.max_new_tokens=48", "runtime.threads=1", "runtime.max_pages=1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An unreadable file and two synthetic pages; a local run of them; a run into a URL killed
    once one page is done, then rerun with its mirror removed."""
    root = tmp_path_factory.mktemp("remote")
    data = root / "in"
    data.mkdir()
    (data / "a_bad.png").write_bytes(b"not a PNG")
    for s in open_dataset({"name": "synth", "pages": 2, "seed": 7100}, model_pages=checkpoint_pages(SHIPPED)):
        s.image.save(data / f"{s.name}.png")
    mount = root / "mount"
    url = f"file://{mount}/run"
    env = {"TREEDEC_RUNS": str(root / "mirrors")}
    args = ["run", "data=images", f"data.root={data}", *FAST]
    local = treedec(*args, f"out={root / 'local'}")
    assert local.returncode == 0, local.stderr[-2000:]
    killed = run_killed_after([*args, f"out={url}"], 1, journal_objects(mount / "run" / JOURNAL_DIR), env=env)
    assert killed.returncode == -9, killed.stderr[-2000:]
    at_kill = {"pages": sorted(p.name for p in (mount / "run" / "pages").iterdir()),
               "journal": sorted(p.name for p in (mount / "run" / JOURNAL_DIR).iterdir())}
    mirror = mirror_of(url, root / "mirrors")
    assert (mirror / "pages").is_dir()
    shutil.rmtree(mirror)  # the next sitting has only what the URL holds
    resumed = treedec(*args, f"out={url}", env=env)
    return {"root": root, "url": url, "mount": mount, "env": env, "args": args, "at_kill": at_kill,
            "resumed": resumed}


def test_a_run_into_a_url_resumes_there_and_writes_what_a_local_run_writes(runs):
    root, out = runs["root"], runs["mount"] / "run"
    first = "synth_0007100"
    # the kill came after the first page's files and its journal entry reached the URL, nothing else of it
    assert runs["at_kill"] == {"pages": [f"{first}.json", f"{first}.md", f"{first}.omnidocbench.json"],
                               "journal": [f"{first}.json"]}
    assert runs["resumed"].returncode == 0, runs["resumed"].stderr[-2000:]
    assert "1 pages of earlier sittings read back" in runs["resumed"].stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["resumed_pages"] == 1 and s["pages_decoded"] == 2 and s["pages"] == 3  # a_bad tried again
    assert page_files(out) == page_files(root / "local") and len(page_files(out)) == 6  # the flagged page too
    assert (out / "report.html").is_file() and (out / "config.yaml").is_file() and (out / "result.json").is_file()
    assert not list(out.rglob("*.tmp")) and not (out / "resume" / "done.jsonl").exists()
    assert sorted(p.name for p in (out / JOURNAL_DIR).iterdir()) == [f"{first}.json", "synth_0007101.json"]


def test_compare_reads_a_run_at_a_url(runs):
    ran = treedec("compare", f"runs={runs['url']}", f"out={runs['root'] / 'cmp'}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "| padoc | 3 |" in (runs["root"] / "cmp" / "compare.md").read_text()  # the run read from the URL


def test_resume_false_empties_the_url_first(runs, tmp_path):
    url = f"file://{tmp_path}/run"
    remote = RemoteOut(url, tmp_path / "m")
    (tmp_path / "m" / "pages").mkdir(parents=True)
    (tmp_path / "m" / "pages" / "old.md").write_text("old")
    remote.push_page("old", {"name": "old", "md": "x", "omnidocbench": "y"})
    assert (tmp_path / "run" / "pages" / "old.md").read_text() == "old"
    ran = treedec(*runs["args"], f"out={url}", "resume=false", "data.glob=synth_0007101.png",
                  env={"TREEDEC_RUNS": str(tmp_path / "mirrors")})
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "run" / "pages").iterdir()) == [
        "synth_0007101.json", "synth_0007101.md", "synth_0007101.omnidocbench.json"]


def test_the_journal_at_a_url_keeps_whole_entries_and_an_unknown_protocol_is_one_line(tmp_path):
    remote = RemoteOut("memory://treedec-test/run", tmp_path / "m")
    (tmp_path / "m" / "pages").mkdir(parents=True)
    for name in ("p1", "p2"):
        (tmp_path / "m" / "pages" / f"{name}.md").write_text(name)
        remote.push_page(name, {"name": name, "md": "h", "omnidocbench": "h"})
    remote.fs.pipe_file(f"{remote.root}/{JOURNAL_DIR}/p3.json", b'{"name": "p')  # cut short: not done
    again = RemoteOut("memory://treedec-test/run", tmp_path / "n")
    assert again.pull() == 2
    lines = (tmp_path / "n" / "resume" / "done.jsonl").read_text().splitlines()
    assert [json.loads(ln)["name"] for ln in lines] == ["p1", "p2"]
    assert (tmp_path / "n" / "pages" / "p2.md").read_text() == "p2"
    assert again.pull(resume=False) == 0 and not remote.fs.exists(f"{remote.root}/pages")
    assert is_url("s3://b/k") and not is_url("runs/x") and not is_url("C:/x")
    with pytest.raises(UserError, match="fsspec cannot open it"):
        RemoteOut("nosuchprotocol://x", tmp_path / "o")
