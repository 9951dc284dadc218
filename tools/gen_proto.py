"""Regenerate qim/proto/v1/*_pb2.py from proto/qim/v1/*.proto.

protoc derives Python import paths from the proto package path (`qim/v1/...` ->
`qim.v1`); the modules live in `qim.proto.v1`, so the imports are rewritten. In the
.pyi stubs an enum field's constructor argument also accepts an int: proto3 enums are
open and an unknown value is carried through unchanged (docs/design.md §4 MessageType), so
passing a raw int is correct and must type-check (mypy runs in `make test`). Used by
`make proto` and by the reproducibility test (which generates into a temp dir).
Usage: python tools/gen_proto.py [OUT_DIR]   (default: qim/proto/v1)
"""

from __future__ import annotations

import pathlib
import re
import sys
import tempfile

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
# an enum-typed constructor argument in a generated stub (messages take `_Mapping` instead)
OPEN_ENUM_ARG = re.compile(r"_Optional\[_Union\[((?:_\w+_pb2\.)?[A-Z][\w.]*), str\]\]")


def generate(out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Write the *_pb2.py/.pyi modules into out_dir; return their paths.
    Raises RuntimeError when protoc fails."""
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto/qim/v1").glob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        rc = protoc.main(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={tmp}", f"--pyi_out={tmp}", *protos])
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit code {rc}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted(pathlib.Path(tmp, "qim/v1").iterdir()):
            text = re.sub(r"\bfrom qim\.v1 import\b", "from qim.proto.v1 import", src.read_text())
            if src.suffix == ".pyi":
                text = OPEN_ENUM_ARG.sub(r"_Optional[_Union[\1, str, int]]", text)
            dst = out_dir / src.name
            dst.write_text(text)
            written.append(dst)
    (out_dir / "__init__.py").write_text('"""Generated Protobuf modules (tools/gen_proto.py). Do not edit."""\n')
    return written


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "qim/proto/v1"
    for path in generate(out):
        print(path)
