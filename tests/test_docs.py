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


def _rows_of_results(text: str) -> list[str]:
    """The data rows of the README's Results table (its header and rule left out)."""
    section = text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [r for r in rows[2:] if not re.fullmatch(r"\|[-| ]*\|", r)]


def test_the_results_table_is_short_and_every_row_links_its_section():
    rows = _rows_of_results((ROOT / "README.md").read_text(encoding="utf-8"))
    assert 0 < len(rows) <= 8, f"{len(rows)} rows in the README's Results (at most 8)"
    long = [r[:60] + "..." for r in rows if len(r) >= 300]
    assert not long, f"Results rows of 300 characters or more: {long}"
    unlinked = [r[:60] + "..." for r in rows if not re.search(r"\]\((docs/[^)]+)\)", r)]
    assert not unlinked, f"Results rows without a link to their docs section: {unlinked}"


def test_a_long_results_table_is_refused():
    table = "\n## Results\n\n| q | f |\n|---|---|\n" + "".join(f"| [q](docs/a.md) | {i} |\n" for i in range(9)) + "\n## Next\n"
    assert len(_rows_of_results(table)) == 9


def _figure_patterns(text: str) -> set[str]:
    """What a text names under docs/figures/: paths and globs (`*`, `{a,b}`), braces expanded."""
    found = set()
    for m in re.findall(r"docs/figures/[\w./*{},-]*[\w*}]", text):
        parts = re.split(r"\{([^}]*)\}", m)  # [text, alternatives, text, ...]
        names = [""]
        for i, part in enumerate(parts):
            names = [n + alt for n in names for alt in (part.split(",") if i % 2 else [part])]
        found |= set(names)
    return found


def _unnamed_figures(patterns: set[str], files: list[str]) -> list[str]:
    from fnmatch import fnmatchcase
    return [f for f in files if not any(fnmatchcase(f, p) for p in patterns)]


def test_every_file_under_docs_figures_is_named_in_the_docs():
    text = "\n".join(d.read_text(encoding="utf-8") for d in DOCS)
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "figures").rglob("*") if p.is_file())
    assert files
    unnamed = _unnamed_figures(_figure_patterns(text), files)
    assert not unnamed, f"files under docs/figures/ that no doc names (name them or delete them): {unnamed}"


def test_a_figure_named_by_a_glob_or_braces_counts_and_a_folder_alone_does_not():
    pats = _figure_patterns("see `docs/figures/a/x_*` and docs/figures/b.{png,json}, and `docs/figures/c/`")
    files = ["docs/figures/a/x_1.json", "docs/figures/b.png", "docs/figures/b.json", "docs/figures/c/d.json"]
    assert _unnamed_figures(pats, files) == ["docs/figures/c/d.json"]


def test_the_experiments_index_is_short():
    lines = (ROOT / "experiments" / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 150, f"experiments/README.md has {len(lines)} lines (under 150)"
