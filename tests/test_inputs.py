"""Inputs users have (data=images): images and PDFs in folders, every kind of bad file,
read lazily; each bad file is a flagged page, only a user mistake stops a run."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from cli_helpers import treedec_here
from conftest import ROOT
from inputs_helpers import bad_inputs, pdf_bytes
from treedec.data import FilesDataset
from treedec.errors import UserError
from treedec.io.files import find_inputs, parse_page_selection, selected
from treedec.io.images import load_image

TINY = ["model=random", "model.spec.image_size=128", "model.spec.text_layers=1", "model.spec.vision_layers=1",
        "model.spec.vision_hidden=64", "model.spec.vision_heads=1", "model.spec.text_hidden=64", "model.spec.head_dim=32",
        "runtime.max_new_tokens=6", "runtime.threads=1"]


def _run(*args):
    return treedec_here("run", *TINY, *args)


def _pages(ds):
    return {s.name: s for s in ds}


def test_every_bad_kind_is_a_flagged_page_with_its_reason(tmp_path):
    expect = bad_inputs(tmp_path)
    pages = _pages(FilesDataset(str(tmp_path)))
    assert sorted(pages) == sorted(expect)
    for name, word in expect.items():
        assert any(word in f for f in pages[name].flags), (name, pages[name].flags)
    unreadable = {n for n, s in pages.items() if s.image is None}
    assert unreadable == {"zero", "truncated", "not_an_image", "fake", "encrypted", "corrupt", "bomb"}
    for name, s in pages.items():
        assert all(f.startswith("unreadable") for f in s.flags) == (name in unreadable)
        assert s.image is None or s.image.mode == "RGB"


def test_conversions_keep_the_picture(tmp_path):
    bad_inputs(tmp_path)
    pages = _pages(FilesDataset(str(tmp_path)))
    grey = np.asarray(pages["grey16"].image)
    assert grey.min() < 10 and 200 < grey.max() < 255  # scaled from 16 bits, not clipped to white
    assert np.asarray(pages["rgba"].image).min() == 255  # transparent is white, not black
    assert pages["cmyk"].image.getpixel((0, 0)) == Image.new("CMYK", (1, 1), (0, 0, 0, 40)).convert("RGB").getpixel((0, 0))
    huge = pages["huge"]
    assert huge.image.size == (4096, 1365) and huge.size == (6000, 2000)  # boxes stay in the page's own pixels


def test_pixel_limit_decodes_jpeg_smaller_and_refuses_the_rest(tmp_path):
    Image.new("RGB", (2000, 2000), "white").save(tmp_path / "big.jpg")
    Image.new("RGB", (2000, 2000), "white").save(tmp_path / "big.png")
    jpg = load_image(tmp_path / "big.jpg", max_pixels=1_500_000, max_side=4096)
    assert jpg.image.size == (1000, 1000) and jpg.size == (2000, 2000) and "reduced scale" in jpg.flags[0]
    png = load_image(tmp_path / "big.png", max_pixels=1_500_000, max_side=4096)
    assert png.image is None and "max_pixels" in png.flags[0] and png.size == (2000, 2000)
    assert Image.MAX_IMAGE_PIXELS is not None  # PIL's own limit is restored


def test_pdf_pages_named_by_document_and_number_selected_and_rendered_at_dpi(tmp_path):
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(("white", "red", "blue")))
    pages = _pages(FilesDataset(str(tmp_path), dpi=72))
    assert list(pages) == ["report.p001", "report.p002", "report.p003"]
    assert pages["report.p002"].image.size == (612, 792) and pages["report.p002"].number == 2
    r, g, b = pages["report.p002"].image.getpixel((300, 300))
    assert r > 250 and g < 5 and b < 5  # the red page (PIL stores it as JPEG: near, not exactly, 255)
    assert list(_pages(FilesDataset(str(tmp_path), dpi=144, pages="2-")).values())[0].image.size == (1224, 1584)
    assert list(_pages(FilesDataset(str(tmp_path / "report.pdf"), pages=[3, 1]))) == ["report.p001", "report.p003"]
    ds = FilesDataset(str(tmp_path), pages=2)
    assert len(ds) == 1 and ds.documents == {"report": ["report.p002"]}


def test_folders_recursive_ordered_unicode_glob_and_single_file(tmp_path):
    for rel in ["page10.png", "page2.png", "a b/ünï côde.jpg", "a b/deep/x.png", "dup.png", "dup.jpg", "notes.txt",
                "doc.pdf"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".pdf"):
            (tmp_path / rel).write_bytes(pdf_bytes(("white",)))
        elif not rel.endswith(".txt"):
            Image.new("RGB", (40, 50), "white").save(tmp_path / rel)
        else:
            (tmp_path / rel).write_text("hello")
    files, skipped = find_inputs(tmp_path)
    assert [f.name for f in files] == ["a b__deep__x", "a b__ünï côde", "doc", "dup.jpg", "dup.png", "page2", "page10"]
    assert skipped == ["notes.txt"]
    assert find_inputs(tmp_path) == (files, skipped)  # deterministic
    assert [f.name for f in find_inputs(tmp_path, recursive=False)[0]] == ["doc", "dup.jpg", "dup.png", "page2", "page10"]
    assert [f.rel for f in find_inputs(tmp_path, glob="*.png")[0]] == ["a b/deep/x.png", "dup.png", "page2.png",
                                                                      "page10.png"]
    assert [f.rel for f in find_inputs(tmp_path, glob="a b/*")[0]] == ["a b/deep/x.png", "a b/ünï côde.jpg"]
    one = FilesDataset(str(tmp_path / "a b" / "ünï côde.jpg"))
    assert [s.name for s in one] == ["ünï côde"]
    assert [s.name for s in FilesDataset(str(tmp_path))][-3:] == ["dup.png", "page2", "page10"]


@pytest.mark.parametrize("spec, want", [(None, [1, 2, 3, 4, 5]), (2, [2]), ("1-3,5", [1, 2, 3, 5]), ([4, 1], [1, 4]),
                                        ("4-", [4, 5]), ("2,4-", [2, 4, 5]), ("7", [])])
def test_page_selection(spec, want):
    assert selected(parse_page_selection(spec), 5) == want


@pytest.mark.parametrize("spec", ["0", "3-1", "a", "1-x", True, {"a": 1}, -2])
def test_bad_page_selection_is_a_one_line_error(spec):
    with pytest.raises(ValueError) as e:
        parse_page_selection(spec)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("setup, kw, message", [
    (lambda d: None, {"root": "missing"}, "does not exist"),
    (lambda d: None, {}, "no images"),
    (lambda d: (d / "notes.txt").write_text("x"), {}, "found only 1 other files"),
    (lambda d: Image.new("RGB", (9, 9)).save(d / "a.png"), {"glob": "*.pdf"}, "data.glob"),
    (lambda d: (d / "r.pdf").write_bytes(pdf_bytes(("white",))), {"pages": "5"}, "selects no page"),
    (lambda d: Image.new("RGB", (9, 9)).save(d / "a.png"), {"dpi": 0}, "data.dpi"),
])
def test_user_mistakes_are_one_line_errors(tmp_path, setup, kw, message):
    setup(tmp_path)
    root = str(tmp_path / kw.pop("root")) if "root" in kw else str(tmp_path)
    with pytest.raises(UserError) as e:
        FilesDataset(root, **kw)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_run_on_bad_inputs_goes_on_flags_each_page_and_writes_documents(tmp_path):
    data = tmp_path / "in"
    expect = bad_inputs(data)
    (data / "docs").mkdir()
    (data / "docs" / "two pages.pdf").write_bytes(pdf_bytes(("white", "red")))
    r = _run("data=images", f"data.root={data}", f"out={tmp_path / 'out'}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trained on treedec's synthetic pages only" not in r.stderr  # model=random: no note about the default model
    out = tmp_path / "out"
    s = json.loads((out / "summary.json").read_text())
    assert s["pages"] == len(expect) + 2 and s["pages_unreadable"] == 7
    report = (out / "report.html").read_text()
    for name, word in expect.items():
        assert any(word in f for f in s["page_flags"][name]), name
        assert any(word in f for f in json.loads((out / "pages" / f"{name}.json").read_text())["flags"]), name
        assert word in report, name
    # the report's top and the terminal's last lines name how many were flagged and the first few
    first = next(iter(s["page_flags"]))
    line = next(ln for ln in r.stderr.splitlines() if "pages flagged" in ln)
    assert line.startswith(f"note: {s['pages_flagged']} of {s['pages']} pages flagged, 7 unreadable: {first} (")
    assert line in r.stderr.strip().splitlines()[-3:]
    from bs4 import BeautifulSoup

    top = BeautifulSoup(report, "html.parser").find("p", class_="alert").get_text()
    assert top == line.removeprefix("note: ")
    # pages with no ground truth are not "scored as empty"
    assert not any("scored as empty" in f for fs in s["page_flags"].values() for f in fs)
    assert any("not decoded" in f for f in s["page_flags"][first])
    doc = (out / "documents" / "docs__two pages.md").read_text()
    assert doc.index("page docs__two pages.p001") < doc.index("page docs__two pages.p002")
    assert "encrypted PDF" in (out / "documents" / "encrypted.md").read_text()


def test_no_readable_input_at_all_is_a_user_error_after_writing_the_summary(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.png").write_bytes(b"")
    (data / "b.pdf").write_bytes(b"nope")
    r = _run("data=images", f"data.root={data}", f"out={tmp_path / 'out'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "none of the 2 input pages could be read" in r.stderr.strip().splitlines()[-1]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["pages_unreadable"] == 2


def test_missing_folder_is_one_line(tmp_path):
    r = _run("data=images", f"data.root={tmp_path / 'nope'}", f"out={tmp_path / 'out'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "does not exist" in r.stderr.strip().splitlines()[-1]


def test_ctrl_c_keeps_written_pages_and_writes_a_summary(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    for i in range(200):  # enough that the run is still decoding when the signal comes (40 took 3 s on a quiet machine,
        Image.new("RGB", (100, 130), (i, i, i)).save(data / f"p{i}.png")  # and once ended before the poll below saw 3)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "treedec", "run", *TINY, "runtime.max_new_tokens=40",
                             "runtime.max_pages=1", "data=images", f"data.root={data}", f"out={out}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a pytest-xdist worker may ignore SIGINT, and a child inherits an ignored signal (Python
                            # then installs no KeyboardInterrupt handler): the child gets the default, as from a shell
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 400
    while proc.poll() is None and time.time() < deadline and len(list(out.glob("pages/*.md"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    s = json.loads((out / "summary.json").read_text())
    done = {p.name[: -len(".json")] for p in (out / "pages").glob("*.json") if not p.name.endswith(".omnidocbench.json")}
    assert s["interrupted"] is True and 3 <= s["pages_done"] < 200 and s["pages_done"] == len(done)
    for name in done:  # whole files, each page's three
        assert json.loads((out / "pages" / f"{name}.json").read_text())["name"] == name
        assert (out / "pages" / f"{name}.md").is_file() and (out / "pages" / f"{name}.omnidocbench.json").is_file()
    assert "interrupted" in err
