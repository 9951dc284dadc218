"""Every pytest fixture is defined in exactly one place (CI failure: tests/fuzz/conftest.py
re-imported the session `stack`, pytest made a second instance, and two stacks on one
set of engines were two owners of every mailbox shard: QIM_WM_CONFLICT). A conftest may
only define fixtures of its own, never import one; tests/conftest.py imports the shared
ones from tests/fixtures.py."""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).parent


def _fixture_names(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(target) in ("pytest.fixture", "fixture"):
                    names.add(node.name)
    return names


def _definitions() -> dict[str, list[pathlib.Path]]:
    defs: dict[str, list[pathlib.Path]] = {}
    for path in TESTS.rglob("*.py"):
        for name in _fixture_names(path):
            defs.setdefault(name, []).append(path)
    return defs


def test_no_conftest_but_the_root_imports_a_fixture():
    defs = _definitions()
    assert TESTS / "fixtures.py" in defs["stack"] and TESTS / "fixtures.py" in defs["engines"]
    fixtures = set(defs)
    for conftest in TESTS.rglob("conftest.py"):
        if conftest == TESTS / "conftest.py":
            continue
        for node in ast.walk(ast.parse(conftest.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                imported = {a.asname or a.name for a in node.names}
                assert not imported & fixtures, f"{conftest} re-imports {imported & fixtures}: a second instance"


def test_session_fixtures_are_defined_once():
    for name, paths in _definitions().items():
        session = [p for p in paths if f"def {name}(" in p.read_text() and 'scope="session"' in p.read_text()]
        assert len(session) <= 1, f"session fixture {name} defined in {session}"
