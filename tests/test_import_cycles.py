"""No import circles in treedec/: a reader can follow every arrow one way (docs/architecture.md:
the layers below never import the layers above). Every import counts, at the top of a module or inside a
function: an import deferred into a function still runs, and still ties both files together."""
import ast
from pathlib import Path

from conftest import load_script

cycles = load_script("scripts/check_layout.py").cycles  # Tarjan's components, as the layout checker finds circles
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "treedec"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (`from a import b` counts as `a.b`
    when `b` is a module, else as `a`)."""
    root = package.parent
    files = {module_name(p, root): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a name inside a module: its module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def test_the_checker_finds_a_circle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "a.py").write_text("from pkg.models.b import B\n")
    (pkg / "models" / "b.py").write_text("def f():\n    from . import a\n")  # deferred and relative: still a circle
    (pkg / "models" / "c.py").write_text("import pkg.models.a\n")
    assert cycles(import_graph(pkg)) == [["pkg.models.a", "pkg.models.b"]]


def test_treedec_has_no_import_circles():
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and graph["treedec.models.loader"] >= {"treedec.models.vlm", "treedec.models.checkpoint_vlm"}
    found = cycles(graph)
    assert not found, "import circles in treedec/: " + "; ".join(" <-> ".join(c) for c in found)
