"""Runs that resume (treedec/run/resume.py): `run data=images` killed with SIGKILL after k pages and
started again with the same out= decodes only the rest; every page's Markdown and OmniDocBench
JSON then equal an uninterrupted run's byte for byte, the pages done before the kill are not
rewritten, a half-written page is redone, and a rerun whose pages would differ is refused in one line."""
import json
import shutil

import pytest
from PIL import Image

from cli_helpers import journal_lines, page_files, run_killed_after, treedec
from treedec.data import open_dataset
from treedec.results.evaluate import evaluate_pages
from treedec.io.markdown import page_to_markdown
from treedec.models.vlm import SHIPPED, checkpoint_pages
from treedec.run.outputs import RunOutput
from treedec.errors import UserError
from treedec.run.resume import FOLDER, JOURNAL, Sitting, check, journal, resumes_in

FAST = ["runtime.max_new_tokens=48", "runtime.threads=1"]  # the shipped tiny model (model=tiny, the default)
KILLED_AT = 4  # pages journaled when the test kills the run: every readable page, in order (the kill lands
# while the run writes its report, before its summary)
KEPT = {"a_doc.p001", "a_doc.p002"}  # the pages still done once two of those are damaged (`folder`)


def _args(data, out, *args):
    return ["run", "data=images", f"data.root={data}", f"out={out}", *FAST, *args]


def _run(data, out, *args):
    """`run` on the folder `data`, in this process."""
    return treedec(*_args(data, out, *args))


def _stamps(out, names):
    """(inode, mtime_ns) of every file of the pages `names`."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (out / "pages").iterdir()
            if p.name.removesuffix(".md").removesuffix(".json").removesuffix(".omnidocbench") in names}


def _half_write(out):
    """What a kill can leave of the last pages: synth_0007002's JSON cut short (its journal line
    present), synth_0007003 without its journal line (files written, line not), a temporary file."""
    cut = out / "pages" / "synth_0007002.omnidocbench.json"
    cut.write_bytes(cut.read_bytes()[:20])
    lines = (out / FOLDER / JOURNAL).read_text().splitlines()
    (out / FOLDER / JOURNAL).write_text("".join(ln + "\n" for ln in lines if '"synth_0007003"' not in ln))
    (out / "pages" / ".synth_0007003.md.123.tmp").write_text("half")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An unreadable file first (never marked done: tried again in each sitting), then four synthetic
    pages: a two-page PDF (its pages the first done; documents/ read back) and two PNGs; an
    uninterrupted run of them; a run killed after KILLED_AT pages (1 in flight, so in order), its last
    two pages then half-written (`_half_write`), and that run resumed."""
    root = tmp_path_factory.mktemp("resume")
    data = root / "in"
    data.mkdir()
    (data / "a_bad.png").write_bytes(b"not a PNG")
    samples = list(open_dataset({"name": "synth", "pages": 4, "seed": 7000}, model_pages=checkpoint_pages(SHIPPED)))
    samples[0].image.save(data / "a_doc.pdf", "PDF", save_all=True, append_images=[samples[1].image])
    for s in samples[2:]:
        s.image.save(data / f"{s.name}.png")
    whole = _run(data, root / "whole")
    assert whole.returncode == 0, whole.stderr[-2000:]
    out = root / "out"
    killed = run_killed_after(_args(data, out, "runtime.max_pages=1"), KILLED_AT, journal_lines(out / FOLDER / JOURNAL))
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL: no summary, nothing cleaned up
    done = list(journal(out))
    _half_write(out)
    kept = set(journal(out))
    stamps = _stamps(out, kept)
    resumed = _run(data, out, "runtime.max_pages=4", "runtime.threads=2")  # concurrency may change
    return {"root": root, "data": data, "done": done, "kept": kept, "stamps": stamps, "resumed": resumed}


def test_killed_run_resumes_the_rest_and_equals_an_uninterrupted_one(folder):
    root, out = folder["root"], folder["root"] / "out"
    assert folder["done"] == ["a_doc.p001", "a_doc.p002", "synth_0007002", "synth_0007003"]  # the kill came after them, in order
    assert folder["resumed"].returncode == 0, folder["resumed"].stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["resumed_pages"] == len(KEPT) and s["pages_decoded"] == 3 and s["pages"] == 5  # a_bad tried again
    assert s["speed_covers"] == "pages decoded in this sitting" and s["by_concurrency"][0]["pages"] == 3
    assert len(folder["stamps"]) == 3 * len(KEPT) and _stamps(out, KEPT) == folder["stamps"]  # the earlier pages' files untouched
    whole = page_files(root / "whole")
    assert len(whole) == 10 and page_files(out) == whole  # every page, byte for byte
    # documents and the inputs' figures cover all pages, the earlier ones read back from their files
    assert (out / "documents" / "a_doc.md").read_bytes() == (root / "whole" / "documents" / "a_doc.md").read_bytes()
    ref = json.loads((root / "whole" / "summary.json").read_text())
    assert s["page_flags"] == ref["page_flags"] and ref["resumed_pages"] == 0 and ref["pages_decoded"] == 5
    # steps are each page's own: over every page, the earlier ones' read back, as the uninterrupted run's
    assert s["steps_cover"] == "every page" and s["by_concurrency"][0]["median_steps"] is not None
    for key in ("median_steps", "mean_steps", "iqr_steps", "median_root_steps", "tokens_per_step", "accepted_per_step"):
        assert s[key] == pytest.approx(ref[key]), key
    assert s["mean_steps"] != pytest.approx(s["by_concurrency"][0]["mean_steps"])  # not this sitting's 3 pages alone


def _copy(folder, name):
    """A copy of the resumed run's folder for a test to change (each test stands alone)."""
    assert folder["resumed"].returncode == 0, folder["resumed"].stderr[-2000:]
    return shutil.copytree(folder["root"] / "out", folder["root"] / name)


def test_a_half_written_page_is_redone(folder):
    """The killed run's half-written pages (`_half_write`: a file cut short, a journal line missing,
    a temporary file) are not done; the resumed run redoes them, the other pages untouched."""
    out, whole = folder["root"] / "out", page_files(folder["root"] / "whole")
    assert folder["kept"] == KEPT and len(folder["stamps"]) == 6  # synth_0007002 (cut), synth_0007003 (no line): not done
    assert folder["resumed"].returncode == 0, folder["resumed"].stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["resumed_pages"] == 2 and s["pages_decoded"] == 3
    assert page_files(out) == whole and _stamps(out, KEPT) == folder["stamps"]
    assert not list((out / "pages").glob(".*.tmp"))


def _config(data, out, *overrides):
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        return compose(config_name="run", overrides=["data=images", f"data.root={data}", f"out={out}", *FAST, *overrides])


def test_a_rerun_whose_pages_would_differ_is_refused_in_one_line(folder):
    out = _copy(folder, "refused")
    before = {p.relative_to(out): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    r = _run(folder["data"], out, "strategy=sequential")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    line = r.stderr.strip().splitlines()[-1]
    assert line == (f"treedec: error: out={out} holds 4 pages of a run whose pages would differ (strategy.name: padoc "
                    f"-> sequential): start afresh with another out=DIR, or resume=false to decode every page again "
                    f"into {out} (its earlier pages are removed)")
    after = {p.relative_to(out): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k.parts[0] != ".hydra"} == \
        {k: v for k, v in before.items() if k.parts[0] != ".hydra"}  # config.yaml too (.hydra: Hydra's own record)
    for change, named in [("runtime.max_new_tokens=40", "runtime.max_new_tokens: 48 -> 40"),
                          ("strategy=padoc_hsd", "strategy.name: padoc -> padoc_hsd"),
                          ("compare=sequential", "compare= does not resume")]:
        with pytest.raises(UserError) as e:
            check(_config(folder["data"], out, change), out)
        assert named in str(e.value) and "resume=false" in str(e.value) and "\n" not in str(e.value)
    # concurrency, threads, logging and reporting do not change the pages
    assert set(check(_config(folder["data"], out, "runtime.max_pages=3", "runtime.threads=2", "concurrency=[1,2]", "timelines=0",
                             "report_pages=1", "cold_drafts=false"), out)) == set(journal(out))


def test_resume_false_starts_afresh(folder, capsys):
    out = _copy(folder, "afresh")
    # a sweep's job that the store runs resumes its folder's pages where it can, else starts afresh
    assert resumes_in(_config(folder["data"], out, "runtime.max_pages=2"), out)
    for change in ("+force=true", "compare=sequential", "strategy=sequential"):
        assert not resumes_in(_config(folder["data"], out, change), out), change
    (out / "pages" / "other.md").write_text("a page of another run")
    sitting = Sitting.open(_config(folder["data"], out, "strategy=sequential", "resume=false"), out)
    assert sitting.earlier == {} and journal(out) == {} and list((out / "pages").iterdir()) == []
    assert not (out / "summary.json").exists() and not (out / "documents").exists()
    assert "removed the 4 pages" in capsys.readouterr().err
    assert check(_config(folder["data"], out, "strategy=sequential"), out) == {}  # nothing done yet: its fingerprint is the new one's
    assert json.loads((out / FOLDER / "fingerprint.json").read_text())["config"]["strategy.name"] == "sequential"


def test_a_rerun_of_a_finished_run_keeps_its_summary(folder, tmp_path):
    """Earlier sittings decoded every page (a sweep's job the store reruns after a commit, say): a
    rerun decodes nothing and their summary stands, said in one line (not a summary of nothing,
    0 pages/s, over the measured one); without that summary, nothing is decoded, no speed is made up
    and the steps are the pages' own."""
    data = tmp_path / "in"
    data.mkdir()
    for png in folder["data"].glob("synth_*.png"):
        shutil.copy(png, data)
    out = tmp_path / "out"
    first = _run(data, out)
    assert first.returncode == 0, first.stderr[-2000:]
    measured = (out / "summary.json").read_bytes()
    s = json.loads(measured)
    assert s["pages_decoded"] == 2 and s["pages_per_s"] > 0 and s["median_steps"] > 0
    stored = json.loads((out / FOLDER / "fingerprint.json").read_text())
    (out / FOLDER / "fingerprint.json").write_text(json.dumps({**stored, "code": {"git": "0" * 40}}))  # a commit since
    again = _run(data, out)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "summary.json").read_bytes() == measured
    assert f"earlier sittings decoded all 2 pages into {out}: nothing to decode" in again.stderr
    assert again.stderr.count("treedec's code changed since the first sitting") == 1
    assert f"kept {out}/summary.json" in again.stdout and "wrote" not in again.stdout
    (out / "summary.json").unlink()  # as a sitting killed after its last page leaves it
    third = _run(data, out)
    assert third.returncode == 0, third.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["resumed_pages"] == 2 and s["pages_decoded"] == 0 and s["pages"] == 2
    assert s["pages_per_s"] is None and s["tokens_per_s"] is None and s["by_concurrency"][0]["median_steps"] is None
    assert s["median_steps"] == json.loads(measured)["median_steps"]  # each page's own steps, read back
    assert s["page_flags"] == json.loads(measured)["page_flags"]  # the inputs' figures: every page, read back


def test_read_back_pages_score_and_read_as_written(tmp_path):
    """What quality and documents see of an earlier sitting's page: its OmniDocBench JSON read
    back gives the same Markdown and the same scores as the page itself."""
    samples = list(open_dataset({"name": "synth", "pages": 3, "seed": 9000}, render=False))
    out = RunOutput(tmp_path)
    for s in samples:
        out.page(s.name, {"steps": 3, "flags": ["x"]}, s.page)
    back = {s.name: Sitting(tmp_path).record(s.name, s.page) for s in samples}
    for s in samples:
        assert page_to_markdown(back[s.name].page) == page_to_markdown(s.page)
        assert back[s.name].flags == ["x"] and back[s.name].figures()["steps"] == 3
    gts = [s.page for s in samples]
    assert evaluate_pages({n: r.page for n, r in back.items()}, gts) == evaluate_pages({s.name: s.page for s in samples}, gts)


def test_the_journal_keeps_only_whole_pages(tmp_path):
    """A page is done only with its journal line, written last, and its files as that line says:
    a file cut short, changed or missing, or a line torn by a kill, and the page is not done."""
    from treedec.records import PageRecord

    samples = list(open_dataset({"name": "synth", "pages": 5, "seed": 9100}, render=False))
    out, sitting = RunOutput(tmp_path), Sitting(tmp_path)
    sitting.folder.mkdir()
    for s in samples:
        out.page(s.name, {"steps": 1}, s.page)
        sitting.done(PageRecord(s.name, s.page, ""))
    out.page("bad", {"flags": ["unreadable: x"]}, samples[0].page)
    sitting.done(PageRecord("bad", samples[0].page, "", flags=["unreadable: x"]))  # tried again next time: not marked
    names = [s.name for s in samples]
    assert list(journal(tmp_path)) == names
    pages = tmp_path / "pages"
    cut = pages / f"{names[0]}.omnidocbench.json"
    cut.write_bytes(cut.read_bytes()[:-3])
    (pages / f"{names[1]}.md").write_text((pages / f"{names[1]}.md").read_text() + " ")
    (pages / f"{names[2]}.md").unlink()
    (pages / f"{names[3]}.json").write_text('{"name": "other"}')
    lines = (sitting.folder / JOURNAL).read_text()
    (sitting.folder / JOURNAL).write_text(lines[:-40])  # the last page's line torn
    assert journal(tmp_path) == {}
