"""docs/architecture.md names every box by its file: each path it names exists, so the
picture cannot silently point at a file that moved."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_path_the_architecture_picture_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"(?:treedec|tests|scripts|experiments)/[\w/.-]*\w(?:\.py|/)", text))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
