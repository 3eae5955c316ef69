"""Fork-rule plug-ins: the top-level strategies/ folder (loaded by path), TREEDEC_STRATEGIES,
the entry-point group, the README's example rule run by the CLI."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from engine_helpers import TOK
from treedec.errors import UserError
from treedec.registry import Registry
from treedec.strategies.base import STRATEGIES


def _readme_rule() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- fork-rule-example -->\n```python\n(.*?)```\n<!-- /fork-rule-example -->", text, re.S)
    return block.group(1)


def test_readme_example_rule_runs_from_a_folder(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "words.py").write_text(_readme_rule())
    assert len(_readme_rule().splitlines()) <= 30
    env = {**os.environ, "TREEDEC_STRATEGIES": str(rules)}
    r = subprocess.run([sys.executable, "-m", "treedec", "depth", "-m", "strategy=padoc,words", "data.pages=5",
                        f"out={tmp_path / 'out'}"], capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    depth = {json.loads(p.read_text())["summary"]["strategy"]: json.loads(p.read_text())["summary"]["median_fork_depth"]
             for p in (tmp_path / "out").glob("*/result.json")}
    assert set(depth) == {"padoc", "words"} and depth["words"] < depth["padoc"]


def test_shipped_rules_are_short_and_import_only_the_api():
    for path in (ROOT / "strategies").glob("*.py"):
        text = path.read_text()
        assert len(text.splitlines()) <= 30, path
        imports = re.findall(r"^(?:from|import) (\S+)", text, re.M)
        assert imports == ["treedec.api"], (path, imports)


def test_entry_points_and_no_shadowing_by_another_strategies_package(tmp_path):
    site = tmp_path / "site"
    (site / "strategies").mkdir(parents=True)  # some other package named `strategies` on sys.path
    (site / "strategies" / "__init__.py").write_text("raise ImportError('the wrong strategies package')\n")
    (site / "my_rules.py").write_text("from treedec.api import fork_rule\n\n"
                                      "@fork_rule('every_token')\ndef every_token(tokens, tok):\n"
                                      "    return [(i, i + 1) for i in range(len(tokens) - 1)]\n")
    dist = site / "my_rules-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rules\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[treedec.strategies]\nmy_rules = my_rules\n")
    code = ("from treedec.strategies.base import STRATEGIES; from treedec.models.vlm import vlm_tokenizer; "
            "print(STRATEGIES.names()); print(STRATEGIES.get('table_rows')(vlm_tokenizer()).name)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    names, rows = r.stdout.splitlines()[-2:]
    assert "'every_token'" in names and "'table_cells'" in names and rows == "table_rows"


def test_a_broken_plugin_is_one_line(tmp_path):
    (tmp_path / "bad.py").write_text("from treedec.api import nothing_here\n")
    reg = Registry("strategy", "treedec.no_such_group", "treedec.strategies", lambda: [tmp_path])
    with pytest.raises(UserError, match=r"plug-in .*bad.py: ImportError"):
        reg.names()


@pytest.mark.parametrize("name", ["table_rows", "padoc_rows"])
def test_padoc_rows_is_table_rows(name, synth_pages):
    old, new = STRATEGIES.get("padoc_rows")(TOK), STRATEGIES.get(name)(TOK)
    assert new.name == name and new.mode == "tree_rows"
    for page in synth_pages[:30]:
        assert new.target(page, TOK, [TOK.image_id]).critical_path() == old.target(page, TOK, [TOK.image_id]).critical_path()
