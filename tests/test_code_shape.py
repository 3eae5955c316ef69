"""The package's shape as the house asks it (issue 53): no function in treedec/ over 60 lines and
no file over 600, read with ast; the checker is checked on a made-up module so the test can fail."""
import ast

from conftest import ROOT

MAX_FUNCTION = 60
MAX_FILE = 600


def long_functions(source: str, limit: int = MAX_FUNCTION) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than `limit` lines."""
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_the_checker_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION + 1)]
    assert long_functions("def g():\n    return 1\n") == []


def test_no_function_over_60_lines_and_no_file_over_600():
    files = sorted((ROOT / "treedec").rglob("*.py"))
    assert files
    long = {f"{p.relative_to(ROOT)}:{name}": n for p in files for name, n in long_functions(p.read_text())}
    assert not long, f"functions over {MAX_FUNCTION} lines: {long}"
    big = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_FILE}
    assert not big, f"files over {MAX_FILE} lines: {big}"
