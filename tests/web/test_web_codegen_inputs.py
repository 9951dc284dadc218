"""web/buf.gen.yaml lists every proto the client's protos import: src/gen is not
committed (a clean clone generates it), so a proto left out of the list builds on a
developer's tree that still holds an old generated file and fails on a clean clone
(it did: reaction.proto, imported by history.proto)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listed() -> set[str]:
    text = (ROOT / "web" / "buf.gen.yaml").read_text()
    return {m.group(1) for m in re.finditer(r"^\s*-\s*\.\./proto/(qim/v1/\w+\.proto)\s*$", text, re.M)}


def _imports(rel: str) -> set[str]:
    text = (ROOT / "proto" / rel).read_text()
    return set(re.findall(r'^import "(qim/v1/\w+\.proto)";', text, re.M))


def test_every_import_of_a_listed_proto_is_listed():
    listed = _listed()
    assert "qim/v1/connection.proto" in listed and len(listed) >= 9
    missing = {imp: src for src in listed for imp in _imports(src) if imp not in listed}
    assert not missing, f"web/buf.gen.yaml must list these (imported by): {missing}"
