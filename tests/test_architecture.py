"""The import graph of qim (docs/decisions/0019-storage-layer.md): the layers a
newcomer can see.

- No module under qim/services imports a storage driver: not redis (or redis.*), nor the
  driver-side packages qim.infra.redis and qim.stores.redis. Services get their stores
  from qim.stores.open and talk to the typing.Protocol interfaces of qim/stores.
- No module under qim/services/<A> imports qim.services.<B> for A != B, and qim/services
  holds only service packages: shared code lives in qim/stores, qim/wire or qim/_core.
- The store interfaces (qim/stores/*.py) import no driver at module level, and
  qim/wire imports neither services nor stores (codecs are pure).
- qim-js (web/src) has no import circle: a Runtime's helpers hold the narrow seam of
  web/src/sdk/core.ts, never runtime.ts (type-only imports count: they tie the files
  as much as any other).

Imports are read with `ast` from the source (also those inside functions), so a lazy
import cannot hide an edge.
"""

from __future__ import annotations

import ast
import pathlib
import re
from typing import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRIVERS = ("redis", "qim.infra.redis", "qim.stores.redis", "cassandra", "confluent_kafka.admin")
STORAGE_DRIVERS = DRIVERS[:4]


def imports(path: pathlib.Path, root: pathlib.Path, top_level_only: bool = False) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import statement of a Python file under `root`;
    `from . import x` is resolved against the file's package; `from a import b` yields a
    and a.b."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _is(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(root: pathlib.Path = ROOT) -> list[str]:
    """Every broken rule of the module docstring, as "path:line: what"."""
    found = []
    services = root / "qim" / "services"
    for path in sorted(services.rglob("*.py")):
        rel = path.relative_to(root)
        parts = path.relative_to(services).parts
        if len(parts) == 1:
            if parts[0] != "__init__.py":
                found.append(f"{rel}: a module directly under qim/services (shared code belongs in qim/stores, "
                             "qim/wire or qim/_core)")
            continue
        service = parts[0]
        for line, module in imports(path, root):
            if any(_is(module, d) for d in STORAGE_DRIVERS):
                found.append(f"{rel}:{line}: imports the storage driver {module} (use qim.stores)")
            if _is(module, "qim.services") and module.count(".") >= 2:
                other = module.split(".")[2]
                if other != service:
                    found.append(f"{rel}:{line}: service {service} imports {module} of service {other}")
    for path in sorted((root / "qim" / "stores").glob("*.py")):
        for line, module in imports(path, root, top_level_only=True):
            if any(_is(module, d) for d in STORAGE_DRIVERS):
                found.append(f"{path.relative_to(root)}:{line}: a store interface imports the driver {module}")
    for path in sorted((root / "qim" / "wire").rglob("*.py")):
        for line, module in imports(path, root):
            if _is(module, "qim.services") or _is(module, "qim.stores") or any(_is(module, d) for d in DRIVERS):
                found.append(f"{path.relative_to(root)}:{line}: a wire codec imports {module}")
    return found


def test_the_import_graph_keeps_its_layers():
    assert violations() == []


TS_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;'"]*?(?:from\s*)?["'](\.{1,2}/[^"']+)["']""", re.M)


def ts_circles(src: pathlib.Path) -> list[list[str]]:
    """The import circles among the .ts files under `src` (relative imports, `import type`
    included), each as its files sorted, relative to `src` (Tarjan's strongly connected
    components of more than one file, or a file importing itself)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.ts")):
        name = path.relative_to(src).as_posix()
        graph[name] = set()
        for target in TS_IMPORT.findall(path.read_text()):
            dep = (path.parent / target).resolve()
            dep = dep if dep.suffix == ".ts" else dep.with_name(dep.name + ".ts")
            if dep.is_file() and dep.is_relative_to(src.resolve()):
                graph[name].add(dep.relative_to(src.resolve()).as_posix())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in graph.get(v, ()):
                out.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(out)


def test_qim_js_has_no_import_circle():
    assert ts_circles(ROOT / "web" / "src") == []


def test_the_circle_check_sees_a_type_only_circle(tmp_path):
    (tmp_path / "sdk").mkdir()
    (tmp_path / "sdk" / "runtime.ts").write_text('import { Puller } from "./puller";\nexport class Runtime {}\n')
    (tmp_path / "sdk" / "puller.ts").write_text('import {\n  x,\n} from "./bytes";\n'
                                                'import type { Runtime } from "./runtime";\n')
    (tmp_path / "sdk" / "bytes.ts").write_text("export const x = 1;\n")
    (tmp_path / "app.ts").write_text('import { Runtime } from "./sdk/runtime";\nimport "./app";\n')
    assert ts_circles(tmp_path) == [["app.ts"], ["sdk/puller.ts", "sdk/runtime.ts"]]


def test_the_rules_see_what_they_forbid(tmp_path):
    """The checker itself: a tree with each kind of edge is reported, line by line."""
    pkg = tmp_path / "qim"
    for d in ("services/writer", "services/fanout", "stores", "wire"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "services" / "__init__.py").write_text("")
    (pkg / "services" / "shared.py").write_text("X = 1\n")
    (pkg / "services" / "writer" / "a.py").write_text(
        "import redis.asyncio\nfrom qim.services.fanout import plan\n\n\ndef f():\n"
        "    from qim.stores.redis.keys import CommitKeys\n    from . import b\n")
    (pkg / "services" / "fanout" / "plan.py").write_text("from qim.services.fanout.x import y\n"
                                                        "from qim.stores.open import open_stores\n")
    (pkg / "stores" / "messages.py").write_text("from redis import exceptions\n\n\ndef f():\n    import redis\n")
    (pkg / "wire" / "codec.py").write_text("from qim.stores.errors import StoreError\n")
    got = violations(tmp_path)
    assert got == [
        "qim/services/shared.py: a module directly under qim/services (shared code belongs in qim/stores, "
        "qim/wire or qim/_core)",
        "qim/services/writer/a.py:1: imports the storage driver redis.asyncio (use qim.stores)",
        "qim/services/writer/a.py:2: service writer imports qim.services.fanout of service fanout",
        "qim/services/writer/a.py:2: service writer imports qim.services.fanout.plan of service fanout",
        "qim/services/writer/a.py:6: imports the storage driver qim.stores.redis.keys (use qim.stores)",
        "qim/services/writer/a.py:6: imports the storage driver qim.stores.redis.keys.CommitKeys (use qim.stores)",
        "qim/stores/messages.py:1: a store interface imports the driver redis",
        "qim/stores/messages.py:1: a store interface imports the driver redis.exceptions",
        "qim/wire/codec.py:1: a wire codec imports qim.stores.errors",
        "qim/wire/codec.py:1: a wire codec imports qim.stores.errors.StoreError",
    ]
