"""The package's layout (issue 68) held by the suite: scripts/check_layout.py (ast only) on this
checkout: at most 12 top-level modules in treedec/, no import circle, no import or dotted name of
treedec that resolves nowhere (code, docs, configs), no function over 60 lines, no getattr/hasattr
probe of an attribute a treedec class declares. Then the checker itself on a planted circle and a
planted probe, so that a checker that passes everything fails here."""
import shutil
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "check_layout.py"


def _check(root):
    return subprocess.run([sys.executable, str(root / "scripts" / "check_layout.py")], capture_output=True, text=True,
                          cwd=root, timeout=120)


def test_the_layout_holds():
    r = _check(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "top-level modules of treedec/: " in r.stdout


def test_the_checker_finds_a_circle_and_a_probe(tmp_path):
    shutil.copytree(ROOT / "treedec", tmp_path / "treedec", ignore=shutil.ignore_patterns("__pycache__", "assets"))
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts")
    (tmp_path / "treedec" / "errors.py").write_text(
        (ROOT / "treedec" / "errors.py").read_text() + "\nimport treedec.cpu\n")
    (tmp_path / "treedec" / "cpu.py").write_text(
        (ROOT / "treedec" / "cpu.py").read_text() + "\nimport treedec.errors\n\n\ndef _probe(vlm):\n"
        "    return getattr(vlm, 'forced', False)\n")
    r = _check(tmp_path)
    assert r.returncode != 0
    assert "FAIL import circle (module-level imports): treedec.cpu <-> treedec.errors" in r.stdout, r.stdout[-3000:]
    assert "getattr(..., 'forced') probes an attribute a treedec class declares" in r.stdout, r.stdout[-3000:]
