"""No import circle in treedec/: the graph of module-level imports between treedec's modules
(read with ast, nothing imported) has no cycle. Imports inside functions are not edges: they
run when called, after every module has loaded."""
import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "treedec"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module):
    """Import statements run when the module loads: at its top level and in its classes, `if` and
    `try` blocks, not in functions nor under `if TYPE_CHECKING`."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
        elif isinstance(node, (ast.If, ast.Try, ast.ClassDef, ast.With)):
            todo += [n for field in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, field, [])]
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body


def import_graph() -> dict[str, set[str]]:
    """Module -> the treedec modules it imports as it loads (`from pkg import sub` names the
    submodule where `sub` is one)."""
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        edges = set()
        for node in _top_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
                continue
            base = node.module or ""
            if node.level:  # relative: from the module's package up
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                edges.add(sub if sub in files else base)
        graph[name] = {e for e in edges if e in files and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_circle_and_only_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_graph_sees_treedecs_imports():
    graph = import_graph()
    assert "treedec.run_pass" in graph["treedec.commands.run"]
    assert "treedec.data.sample" in graph["treedec.data.files"]
    assert len(graph) > 100


def test_treedec_has_no_import_circle():
    assert cycles(import_graph()) == []
