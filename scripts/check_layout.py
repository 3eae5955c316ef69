#!/usr/bin/env python3
"""The package's layout as issue 68 asks it, read with `ast` only (it never imports treedec, so
it runs in any Python 3.11 without the project's libraries):

  (a) treedec/'s top level holds at most 12 modules (`__init__.py` and `__main__.py` included);
  (b) no import circle among treedec's modules (Tarjan): module-level imports must not circle
      (an import inside a function may break one), and, as tests/test_import_cycles.py asks,
      neither may all imports together; both are reported (an import of `treedec.a.b` runs package
      `treedec.a`'s `__init__.py` first: that counts as an import of it too);
  (c) every treedec module an import names exists, and a name `from treedec.X import name` takes
      is bound in X (or is a module of package X) -- in treedec/, tests/, experiments/, scripts/
      and strategies/; dotted names `treedec.X.name` in strings (monkeypatch targets, Hydra
      `_target_`s) and in the text of the docs, configs and comments resolve the same way;
  (d) no function in treedec/ over 60 lines;
  (e) no hidden state: no `getattr(x, "NAME"...)` / `hasattr(x, "NAME")` in treedec/ whose
      constant NAME a treedec class declares (in its body: annotations, assignments, methods,
      properties, dataclass fields; or as `self.NAME = ...` in one of its methods) -- where the
      object is one of treedec's, the attribute is declared and read; where it is a library's, read
      it as the pinned version has it.
  Paths `treedec/...` that the docs, configs and comments name exist too.

    python3 scripts/check_layout.py        # exit 1 and one line a problem where one fails
"""
from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "treedec"
MAX_TOP_MODULES = 12
MAX_FUNCTION = 60
ELSEWHERE = ("tests", "experiments", "scripts", "strategies")  # code outside the package that imports it
TEXT_SUFFIXES = {".md", ".yaml", ".yml", ".toml", ".sh", ".cfg", ".txt", ".py", ".cff", ""}  # "": .ci/run and such
SKIP_DIRS = {".git", "runs", ".venv", ".venv-ci", "__pycache__", "outputs", "multirun", "wandb"}
DOTTED = re.compile(r"(?<![\w.])treedec(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])treedec/[\w/.-]*\w(?:\.py|\.yaml|\.md|/)")
# dotted words that are not module paths: a checkpoint's file, a distribution's metadata folder;
# names the tests make up to see them refused
NOT_MODULES = {"treedec.json", "treedec.egg", "treedec.no_such_group"}
NOT_PATHS = {"treedec/strategies/gone.py", "treedec/conf/strategy/name.yaml"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _bound(body: list[ast.stmt], names: set[str]) -> bool:
    """Add the names `body` binds at its own level (compound statements entered, defs not); True
    where a star import or a module `__getattr__` makes any name possible."""
    anything = False
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            anything |= node.name == "__getattr__"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    anything = True
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(node, field, None)
            if isinstance(sub, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stmts = [s for s in sub if isinstance(s, ast.stmt)]
                stmts += [s for h in sub if isinstance(h, ast.ExceptHandler) for s in h.body]
                anything |= _bound(stmts, names)
    return anything


class Package:
    """treedec's modules: their files, trees and the names each binds at module level."""

    def __init__(self) -> None:
        self.files = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
                      if not SKIP_DIRS & set(p.relative_to(ROOT).parts)}
        self.trees = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in self.files.items()}
        for folder in sorted({p.parent for p in self.files.values()}):  # namespace packages (no __init__.py)
            name = module_name(folder / "__init__.py")
            if name not in self.files:
                self.files[name], self.trees[name] = folder / "__init__.py", ast.Module(body=[], type_ignores=[])
        self.scans = {m: Scan(tree, m, self.files[m].name == "__init__.py") for m, tree in self.trees.items()}
        self.names: dict[str, set[str]] = {}
        self.open: set[str] = set()
        for m, tree in self.trees.items():
            names: set[str] = set()
            if _bound(tree.body, names):
                self.open.add(m)
            self.names[m] = names

    def module_of(self, dotted: str) -> tuple[str, list[str]]:
        """The longest module prefix of `dotted` and the rest ("" where not even `treedec`)."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in self.files:
                return ".".join(parts[:i]), parts[i:]
        return "", parts

    def resolves(self, dotted: str) -> bool:
        """`treedec.a.b.name...`: its module exists and binds the first name after it."""
        mod, rest = self.module_of(dotted)
        return bool(mod) and (not rest or rest[0] in self.names[mod] or rest[0].startswith("__") or mod in self.open)


class Scan:
    """What one file's tree names, read in one walk: its imports (module, name or None, and whether
    inside a function: deferred, it runs when the function does; relative ones made absolute),
    its string constants and its attribute chains rooted at the name `treedec`."""

    def __init__(self, tree: ast.AST, mod: str, is_pkg: bool) -> None:
        self.imports: list[tuple[int, str, str | None, bool]] = []
        self.strings: list[tuple[int, str]] = []
        self.chains: list[tuple[int, str]] = []
        self.functions: list[tuple[int, str, int]] = []  # line, name, length in lines
        stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]  # node, in a function, under an Attribute
        while stack:
            node, deferred, in_attr = stack.pop()
            if isinstance(node, ast.Import):
                self.imports += [(node.lineno, a.name, None, deferred) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                self.imports += [(node.lineno, base, a.name, deferred) for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.strings.append((node.lineno, node.value))
            elif isinstance(node, ast.Attribute) and not in_attr:
                chain, n = [], node
                while isinstance(n, ast.Attribute):
                    chain.append(n.attr)
                    n = n.value
                if isinstance(n, ast.Name) and n.id == "treedec":
                    self.chains.append((node.lineno, ".".join(["treedec", *reversed(chain)])))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.append((node.lineno, node.name, node.end_lineno - node.lineno + 1))
            inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            stack += [(c, inner, isinstance(node, ast.Attribute)) for c in ast.iter_child_nodes(node)]


def _packages_run(target: str, mod: str) -> list[str]:
    """The packages whose `__init__.py` importing `target` from `mod` runs first: `target`'s
    ancestors below `treedec`, less `mod`'s own (already running when `mod` runs)."""
    parts = target.split(".")
    ancestors = {".".join(parts[:i]) for i in range(2, len(parts))}
    mod_parts = mod.split(".")
    return sorted(ancestors - {".".join(mod_parts[:i]) for i in range(1, len(mod_parts) + 1)})


def import_graphs(pkg: Package) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> the treedec modules it imports: at module level, and counting every import. An
    import of `a.b.c` also runs package `a.b`'s `__init__.py`: that counts as an import of it."""
    top: dict[str, set[str]] = {m: set() for m in pkg.files}
    every: dict[str, set[str]] = {m: set() for m in pkg.files}
    for mod, scan in pkg.scans.items():
        for _, base, name, deferred in scan.imports:
            target = f"{base}.{name}" if name and f"{base}.{name}" in pkg.files else base
            target = pkg.module_of(target)[0]
            for t in [target, *_packages_run(target, mod)] if target else []:
                if t != mod:
                    every[mod].add(t)
                    if not deferred:
                        top[mod].add(t)
    return top, every


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def broken_imports(pkg: Package, path: Path, scan: Scan) -> list[str]:
    """Imports of treedec modules or names that do not exist, and dotted treedec names in strings
    and attribute chains (`treedec.x.y`) that do not resolve."""
    rel = path.relative_to(ROOT)
    bad = []
    for lineno, base, name, _ in scan.imports:
        if not (base == "treedec" or base.startswith("treedec.")):
            continue
        dotted = f"{base}.{name}" if name and name != "*" else base
        ok = base in pkg.files and (name is None or name == "*" or dotted in pkg.files or pkg.resolves(dotted))
        if not ok:
            bad.append(f"{rel}:{lineno}: import of {dotted}: no such treedec module or name")
    for lineno, value in scan.strings:
        if DOTTED.fullmatch(value) and not pkg.resolves(value) and value not in NOT_MODULES:
            bad.append(f"{rel}:{lineno}: string {value!r} names no treedec module or name")
    bad += [f"{rel}:{lineno}: {dotted} names no treedec module or name"
            for lineno, dotted in scan.chains if not pkg.resolves(dotted)]
    return bad


def text_files() -> list[Path]:
    """The repository's text files (docs, configs, scripts, code), build and run folders left out."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                         and (d == ".ci" or not d.startswith(".")))  # data folders (.demo, .whl, ...) left out
        out += [Path(folder) / f for f in sorted(files) if Path(f).suffix in TEXT_SUFFIXES]
    return out


def stale_mentions(pkg: Package) -> list[str]:
    """Dotted names and paths of treedec that texts name (docs, configs, comments, docstrings) and
    that do not exist. A name ending in `*`, `{` or `NAME` is a pattern, not a path."""
    bad = []
    for p in text_files():
        if p == Path(__file__).resolve():
            continue
        rel = p.relative_to(ROOT)
        for lineno, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in DOTTED.finditer(line):
                dotted = m.group(0)
                if dotted in NOT_MODULES or pkg.resolves(dotted):
                    continue
                if pkg.module_of(dotted)[0] not in ("", "treedec"):  # its module exists: an attribute's name
                    continue
                bad.append(f"{rel}:{lineno}: names {dotted} (no such treedec module)")
            for m in PATH.finditer(line):
                named, tail = m.group(0), line[m.end():m.end() + 1]
                if tail and tail in "*{<" or re.search(r"[A-Z]{3,}", named):  # a pattern or a placeholder
                    continue
                if not (ROOT / named).exists() and named not in NOT_PATHS:
                    bad.append(f"{rel}:{lineno}: names {named} (no such file or folder)")
                siblings = re.match(r"(?: · [\w.]+\.py)*", line[m.end():]).group(0)  # `a/b.py · c.py`: a/c.py
                folder = named.rpartition("/")[0]
                for sib in re.findall(r"[\w.]+\.py", siblings):
                    if not (ROOT / folder / sib).exists() and f"{folder}/{sib}" not in NOT_PATHS:
                        bad.append(f"{rel}:{lineno}: names {sib} beside {named} (no such file in its folder)")
    return bad


def long_functions(pkg: Package) -> list[str]:
    return sorted(f"{pkg.files[m].relative_to(ROOT)}:{line}: {name} has {n} lines"
                  for m, scan in pkg.scans.items() for line, name, n in scan.functions if n > MAX_FUNCTION)


PROBES = ("getattr", "hasattr")


def declared_attributes(trees) -> set[str]:
    """Every attribute name a class in `trees` declares: its body's annotations, assignments,
    methods and properties (dataclass fields are annotations), and `self.NAME = ...` (also
    `setattr(self, "NAME", ...)` and `object.__setattr__(self, "NAME", ...)`) in its methods."""
    names: set[str] = set()
    for tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            _bound(cls.body, names)
            for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                if fn.args.args:
                    names |= _self_assigned(fn, fn.args.args[0].arg)
    return names


def _self_assigned(fn: ast.AST, me: str) -> set[str]:
    """The attributes of `me` (a method's first argument) that `fn` assigns."""
    out: set[str] = set()
    for node in ast.walk(fn):
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for t in targets:
            out |= {a.attr for a in ast.walk(t) if isinstance(a, ast.Attribute)
                    and isinstance(a.value, ast.Name) and a.value.id == me}
        if (isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[0], ast.Name)
                and node.args[0].id == me and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and ast.unparse(node.func) in ("setattr", "object.__setattr__")):
            out.add(node.args[1].value)
    return out


def probes(tree: ast.AST) -> list[tuple[int, str, str]]:
    """`getattr(x, "NAME"...)` and `hasattr(x, "NAME")` calls: line, which, NAME."""
    return sorted((n.lineno, n.func.id, n.args[1].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in PROBES
                  and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant)
                  and isinstance(n.args[1].value, str))


def hidden_state(pkg: Package) -> list[str]:
    declared = declared_attributes(pkg.trees.values())
    return [f"{pkg.files[m].relative_to(ROOT)}:{line}: {which}(..., {name!r}) probes an attribute a treedec class declares"
            for m, tree in sorted(pkg.trees.items()) for line, which, name in probes(tree) if name in declared]


def main() -> int:
    pkg = Package()
    failures: list[str] = []
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    print(f"(a) top-level modules of treedec/: {len(top)} (at most {MAX_TOP_MODULES}): {' '.join(top)}")
    if len(top) > MAX_TOP_MODULES:
        failures.append(f"treedec/ holds {len(top)} top-level modules, more than {MAX_TOP_MODULES}")
    top_graph, every_graph = import_graphs(pkg)
    for label, graph in (("module-level imports", top_graph), ("all imports, deferred included", every_graph)):
        found = cycles(graph)
        print(f"(b) import circles among {len(graph)} modules, {label}: {len(found)}")
        failures += [f"import circle ({label}): " + " <-> ".join(c) for c in found]
    bad = []
    for p in sorted(PACKAGE.rglob("*.py")):
        bad += broken_imports(pkg, p, pkg.scans[module_name(p)])
    for folder in ELSEWHERE:
        for p in sorted((ROOT / folder).rglob("*.py")):
            if not SKIP_DIRS & set(p.relative_to(ROOT).parts):
                bad += broken_imports(pkg, p, Scan(ast.parse(p.read_text(encoding="utf-8"), str(p)), "", False))
    print(f"(c) broken imports and dotted names (treedec/, {', '.join(ELSEWHERE)}/): {len(bad)}")
    failures += bad
    stale = stale_mentions(pkg)
    print(f"    stale treedec names and paths in texts (docs, configs, comments): {len(stale)}")
    failures += stale
    long = long_functions(pkg)
    print(f"(d) functions in treedec/ over {MAX_FUNCTION} lines: {len(long)}")
    failures += long
    hidden = hidden_state(pkg)
    print(f"(e) getattr/hasattr in treedec/ with a constant name a treedec class declares: {len(hidden)}")
    failures += hidden
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
