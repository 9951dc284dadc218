"""Habits as tests (in the manner of asyncpg's tests/test__sourcecode.py):
`ruff check` and `mypy` over the source with the configuration in pyproject.toml, and
every public function, class and method under qim/ has a docstring (generated Protobuf
modules aside). `make test` runs these with everything else.

ruff and mypy come with the `test` extra; a missing tool FAILS (never skips), so a
machine that cannot check the source is noticed.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MYPY_TIMEOUT_S = 900  # a cold cache on two busy cores


def run_tool(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff_finds_nothing():
    proc = run_tool("ruff", "check", "qim", "tests", "tools", "benches", "--output-format", "concise")
    assert proc.returncode == 0, f"ruff check failed:\n{proc.stdout}{proc.stderr}"


def test_mypy_finds_nothing():
    proc = run_tool("mypy", timeout=MYPY_TIMEOUT_S)  # files and options: [tool.mypy] in pyproject.toml
    assert proc.returncode == 0, f"mypy failed:\n{proc.stdout}{proc.stderr}"


def missing_docstrings(package: pathlib.Path, root: pathlib.Path = ROOT) -> tuple[list[str], int]:
    """Public functions, classes and methods (classes walked, function bodies not)
    without a docstring: (names as path:line:qualname, how many were looked at)."""
    missing: list[str] = []
    total = 0
    for path in sorted(package.rglob("*.py")):
        if path.name.endswith("_pb2.py") or "proto" in path.relative_to(package).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if child.name.startswith("_"):
                    continue
                total += 1
                if not ast.get_docstring(child):
                    missing.append(f"{path.relative_to(root)}:{child.lineno}:{prefix}{child.name}")
                if isinstance(child, ast.ClassDef):
                    stack.append((child, f"{prefix}{child.name}."))
    return missing, total


def test_every_public_function_and_class_has_a_docstring():
    missing, total = missing_docstrings(ROOT / "qim")
    assert total > 500  # the walk found the package
    assert not missing, f"{len(missing)} of {total} public names without a docstring:\n" + "\n".join(missing)


def test_the_docstring_check_sees_what_it_must(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "proto").mkdir(parents=True)
    (pkg / "mod.py").write_text('def f():\n    pass\n\n\nclass C:\n    """Doc."""\n\n    def m(self):\n        pass\n\n'
                                '    def _private(self):\n        pass\n\n\ndef g():\n    """Doc."""\n\n'
                                '    def inner():\n        pass\n')
    (pkg / "proto" / "x_pb2.py").write_text("def generated():\n    pass\n")
    missing, total = missing_docstrings(pkg, tmp_path)
    assert sorted(missing) == ["pkg/mod.py:1:f", "pkg/mod.py:8:C.m"] and total == 4
