"""The documents a person reads first stay true: docs/architecture.md names every box by a
file that exists (sibling files after `·` included, so a picture cannot point at a file
that moved); the README is a front door of at most 300 lines whose main job runs a
comparison; every relative link of the README and docs/ reaches a file and, with
`#anchor`, a heading of it."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def named_paths(text: str) -> set[str]:
    """Paths a text names: `dir/file.py`, and `other.py` after ` · ` beside one (same folder)."""
    found = set()
    for m in re.finditer(r"((?:treedec|tests|scripts|experiments|strategies)/[\w/.-]*\w(?:\.py|/))((?: · [\w.]+\.py)*)", text):
        path, siblings = m.group(1), m.group(2)
        found.add(path)
        folder = path.rpartition("/")[0]
        found |= {f"{folder}/{name}" for name in re.findall(r"[\w.]+\.py", siblings)}
    return found


def test_every_path_the_architecture_picture_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 20 and "treedec/strategies/crops.py" in paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_sibling_names_are_checked_too():
    assert named_paths("treedec/strategies/padoc.py · gone.py") == {"treedec/strategies/padoc.py",
                                                                    "treedec/strategies/gone.py"}


def test_the_readme_is_a_front_door_whose_main_job_compares():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    setup = text.split("## Set-up", 1)[1].split("<!-- test-command -->", 1)[0]
    main_job = re.search(r"python -m treedec run [^\n`]*", setup).group(0)
    assert "compare=" in main_job, main_job


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_reaches_a_file_and_heading():
    bad = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            if not dest.exists():
                bad.append(f"{doc.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md":
                heads = {_slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(encoding="utf-8"), re.M)}
                if anchor not in heads:
                    bad.append(f"{doc.name}: {target} (no such heading)")
    assert not bad, bad
