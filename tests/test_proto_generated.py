"""qim/proto/v1 is exactly what tools/gen_proto.py generates from proto/qim/v1.

The generator is run into a temp dir with the pinned grpcio-tools (pyproject `test`
extra) and every generated file is compared byte for byte with the committed one; a
stale module, a missing one or an extra one fails. Regenerate with `make proto`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "qim/proto/v1"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "tools/gen_proto.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _files(folder: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()
            if p.is_file() and p.suffix in (".py", ".pyi")}


def test_grpcio_tools_is_the_pinned_version() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [re.sub(r"\s", "", d) for d in extras["test"] if d.startswith("grpcio-tools")]
    assert pin == f"grpcio-tools=={importlib.metadata.version('grpcio-tools')}"


def test_generated_modules_are_reproducible(tmp_path: pathlib.Path) -> None:
    written = _generator().generate(tmp_path)
    protos = sorted(p.stem for p in (ROOT / "proto/qim/v1").glob("*.proto"))
    assert sorted({p.name.split("_pb2")[0] for p in written}) == protos
    fresh, committed = _files(tmp_path), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "run `make proto`"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated modules (run `make proto`): {stale}"
