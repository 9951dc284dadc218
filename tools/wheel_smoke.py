"""Import every compiled qim._core module of an installed qim wheel and use each once,
and prove an app-only install (no extras) is enough for the SDK.

Run inside a fresh virtual environment by tools/wheel_check.py, and by cibuildwheel's
test-command, always as `python -I` so neither a checkout nor the user site can shadow
the installed package. Fails (exit 1, message on stderr) when a module is missing, is
not an extension module, does not come from this environment's site-packages, or
gives a wrong result; prints one JSON line {"python", "modules"} otherwise.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import pathlib
import subprocess
import sys
import sysconfig

NAMES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")
SERVER_EXTRA = ("redis", "confluent_kafka", "prometheus_client", "pyroaring", "numpy")
# PING, opcode 0x0103, request_id 1, empty body: written out literally (docs/design.md §4)
PING_1 = b"\x51\x49\x01\x00\x01\x03\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x94\x2b\x9c\x1a"


def check_modules() -> dict[str, str]:
    """Extension file name per module; AssertionError when one is not a real build."""
    site = pathlib.Path(sysconfig.get_paths()["platlib"]).resolve()
    found = {}
    for name in NAMES:
        path = pathlib.Path(importlib.import_module(f"qim._core.{name}").__file__).resolve()
        assert path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), path
        assert site in path.parents, f"{path} is not under {site}"
        found[name] = path.name
    return found


def check_behaviour() -> None:
    """One small round trip through every module (zstd and BLAKE3 included)."""
    from blake3 import blake3

    import qim._core as core
    from qim._core.types import MailboxEvent

    assert core.COMPILED and not core.PURE
    f = core.frame
    assert f.decode_header(PING_1) == (0, 0x0103, 0, 1, 0)
    assert f.encode_header(0, 0x0103, 0, 1, 0) == PING_1
    chunks = f.encode_frame(0x0301, 9, b"hello " * 4000, compress=True, chunk_bytes=100)
    assert f.FrameDecoder().feed(b"".join(chunks)) == [(0x0301, 9, b"hello " * 4000)]
    assert core.mailbox_seq.split(core.mailbox_seq.compose(1, 0)) == (1, 0)
    wm = core.watermark
    assert wm.start_offset(wm.advance_all(wm.empty(), 0)) == 1
    ev = MailboxEvent(1, b"\x01" * 16, b"\x02" * 16, b"\x03" * 16, 5, 42, 1_717_000_000_000, 1,
                      b"ct", b"\x04" * 16, b"body")
    eg = core.eventgroup
    assert eg.unpack_group(eg.pack_group([ev])) == [ev]
    expect = b"\x01" + blake3(b"qim.direct.v1\0" + bytes(16) + (1).to_bytes(8, "big")
                              + (2).to_bytes(8, "big")).digest()[:15]
    assert core.ids.conversation_id_direct(0, 2, 1) == expect


def check_app_only() -> dict[str, object]:
    """The installed wheel without extras: SDK importable, server modules absent, a
    service refuses with the pip command; py.typed shipped, fixtures not."""
    present = [m for m in SERVER_EXTRA if importlib.util.find_spec(m) is not None]
    assert not present, f"installed without extras but {present} are importable"
    import qim
    import qim.sdk  # noqa: F401 — the import is the check

    package = pathlib.Path(qim.__file__).parent
    assert (package / "py.typed").is_file(), "py.typed missing"
    assert not (package / "dev" / "testing.py").exists(), "test fixtures shipped in the wheel"
    proc = subprocess.run([sys.executable, "-I", "-c", "from qim.app.main import main; main('writer')"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4 and "pip install 'qim[server]'" in proc.stderr, (proc.returncode, proc.stderr)
    return {"sdk": True, "server_extra_absent": list(SERVER_EXTRA), "service_exit": proc.returncode}


def main() -> int:
    try:
        modules = check_modules()
        check_behaviour()
        app_only = check_app_only()
    except (AssertionError, ImportError) as e:
        print(f"wheel smoke test failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"python": sys.version.split()[0], "modules": modules, "app_only": app_only}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
