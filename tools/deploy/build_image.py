"""Build QIM's OCI image without Docker (`make image`; docs/decisions/0109-oci-image-and-helm-chart.md).

One image for every service: the command chooses it (`qim-gateway`, `qim-writer`, ...,
as the systemd template units do; the default command is `qim-gateway`). Steps:

1. the wheels: QIM's manylinux wheel from wheelhouse/ (`make wheel`) and its `server`
   dependencies downloaded from PyPI as binary wheels, pinned to the versions of this
   checkout's .venv (the versions the tests ran), cached in build/image/wheels;
2. a Debian bookworm root file system from Debian's packages (mmdebstrap, variant
   essential plus python3 and ca-certificates; the .debs cached in build/image/debs),
   QIM's wheel installed into /opt/qim/venv inside it, then stripped: no pip, no
   setuptools, no dpkg or apt binaries (the package list stays in /var/lib/dpkg/status
   for scanners), no compilers (none is installed), no docs; the user qim (10001);
   every .pyc compiled content-addressed (unchecked-hash) so that a read-only root needs
   no cache writes and file times do not reach the bytes;
3. every file time set to SOURCE_DATE_EPOCH (the wheel's commit time by default), then
   umoci assembles an OCI image layout in build/image/oci (tag `qim`) with that time as
   its creation time: the same wheel, dependency wheels and Debian packages give the
   same digest.

Prints `image: digest=sha256:… layer=… MB rootfs=… MB` last. Usage:
python tools/deploy/build_image.py [--out build/image] [--wheel PATH]. Exit 1 naming the
step that failed (its output tail); root is required (mmdebstrap's root mode, chroot).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# libstdc++6: pyroaring and numpy link it (the tests import every native module in the image)
PACKAGES = ["python3", "python3-venv", "ca-certificates", "libstdc++6"]
UID = 10001
# what the image's Python (Debian's 3.11.2) needs beyond the build machine's: redis asks
# for async-timeout below 3.11.3, a marker pip download evaluates for this interpreter
IMAGE_ONLY = ["async-timeout>=4.0.3"]
# pure-Python dependencies PyPI serves only as source (the push extra's Web Push payload
# encryption, decision 0130): a wheel is built from the pinned source on the host, never in
# the image (no compiler or build tools are left there)
SDIST_ONLY = ("http-ece",)
VENV = "/opt/qim/venv"
# removed from the root file system once the venv is installed: package managers and
# what only an install needs (the image is rebuilt, never updated in place)
STRIP = ["usr/bin/dpkg*", "usr/sbin/dpkg*", "usr/bin/apt*", "usr/share/doc", "usr/share/man",
         "usr/share/info", "usr/share/locale", "usr/share/python-wheels", "var/cache/apt",
         "var/lib/apt", "var/log/*", "tmp/wheels", "etc/machine-id", "var/cache/ldconfig/aux-cache"]


class BuildError(RuntimeError):
    """A step failed: the message names it and carries the tool's output tail."""


def run(step: str, cmd: list[str], **kw) -> str:
    """Run cmd; its stdout, or BuildError with the last lines of its output."""
    print(f"image: {step}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BuildError(f"{step} failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def pins() -> list[str]:
    """name==version of every package in this checkout's .venv (the tested versions)."""
    out = run("pins from .venv", [str(ROOT / ".venv/bin/python"), "-m", "pip", "freeze", "--exclude-editable"])
    return [line for line in out.splitlines() if "==" in line]


def wheels(wheel: pathlib.Path, out: pathlib.Path) -> None:
    """QIM's wheel and its server dependencies as binary wheels in out/."""
    out.mkdir(parents=True, exist_ok=True)
    # beside the wheels: the install in the image takes the same pins (the cache may hold
    # other versions from earlier builds)
    constraints = out / "constraints.txt"
    constraints.write_text("\n".join(pins()) + "\n")
    if wheel.resolve().parent != out.resolve():  # a rebuild may name the wheel of the cache itself
        for old in out.glob("qim-*.whl"):
            old.unlink()
        shutil.copy2(wheel, out / wheel.name)
    for name in SDIST_ONLY:  # built here once, at the pinned version, found by --find-links
        pin = next((p for p in pins_of(constraints) if p.lower().startswith(name + "==")), name)
        if not list(out.glob(name.replace("-", "_") + "-*.whl")):
            run(f"a wheel of {pin} (PyPI serves it as source only)",
                [str(ROOT / ".venv/bin/python"), "-m", "pip", "wheel", "-q", "--no-deps", "--no-binary", name,
                 "-w", str(out), pin], env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"})
    run("dependency wheels (PyPI, cached)", [str(ROOT / ".venv/bin/python"), "-m", "pip", "download", "-q",
        "--only-binary=:all:", "--find-links", str(out), "-c", str(constraints), "-d", str(out),
        f"{out / wheel.name}[server]", *IMAGE_ONLY])


def pins_of(constraints: pathlib.Path) -> list[str]:
    """The name==version lines of a constraints file."""
    return [line.strip() for line in constraints.read_text().splitlines() if "==" in line]


def mounts_below(target: pathlib.Path) -> list[str]:
    """The mount points strictly below `target` (from /proc/self/mountinfo)."""
    base = str(target.resolve()) + "/"
    points = [line.split()[4] for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p.startswith(base)]


def rootfs(target: pathlib.Path, wheel_dir: pathlib.Path, wheel: str, debs: pathlib.Path, epoch: int) -> None:
    """The Debian root file system with QIM installed and stripped (module doc, step 2)."""
    if target.exists():
        shutil.rmtree(target)
    debs.mkdir(parents=True, exist_ok=True)
    users = (f"echo 'qim:x:{UID}:{UID}:QIM:/nonexistent:/usr/sbin/nologin' >> \"$1/etc/passwd\"; "
             f"echo 'qim:x:{UID}:' >> \"$1/etc/group\"; echo 'qim:*:0:0:99999:7:::' >> \"$1/etc/shadow\"")
    strip = " ".join(f'"$1"/{p}' for p in STRIP)  # unquoted globs: the shell of the hook expands them
    hooks = [
        f'--setup-hook=mkdir -p "$1/var/cache/apt/archives" && cp -a {debs}/. "$1/var/cache/apt/archives/"',
        f'--customize-hook=cp -a "$1"/var/cache/apt/archives/*.deb {debs}/ 2>/dev/null || true',
        f'--customize-hook=mkdir -p "$1/tmp/wheels" && cp -a {wheel_dir}/. "$1/tmp/wheels/"',
        f'--customize-hook=chroot "$1" env -i PATH=/usr/bin:/bin python3 -m venv {VENV}',
        f'--customize-hook=chroot "$1" env -i PATH=/usr/bin:/bin {VENV}/bin/pip install -q --no-index --no-compile '
        f'--find-links /tmp/wheels -c /tmp/wheels/constraints.txt "/tmp/wheels/{wheel}[server]"',
        f'--customize-hook=chroot "$1" env -i PATH=/usr/bin:/bin {VENV}/bin/python -m pip uninstall -q -y pip setuptools',
        f"--customize-hook={users}",
        f"--customize-hook=rm -rf {strip}",
        '--customize-hook=find "$1"/usr "$1"/opt -name __pycache__ -type d -prune -exec rm -rf {} +',
        '--customize-hook=chroot "$1" env -i PATH=/usr/bin:/bin python3 -m compileall -q -j 1 --invalidation-mode unchecked-hash '
        f'/usr/lib/python3 /usr/lib/python3.11 {VENV}/lib >/dev/null',
    ]
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch))
    run(f"Debian {SUITE} root file system (mmdebstrap; QIM's wheel into {VENV})",
        ["mmdebstrap", "--mode=root", "--variant=essential", "--format=directory", "--quiet",
         f"--include={','.join(PACKAGES)}", "--dpkgopt=path-exclude=/usr/share/doc/*",
         *hooks, SUITE, str(target), MIRROR], env=env)
    # mmdebstrap mounts /proc (and /sys, /dev) for its hooks; once it was seen still
    # mounted afterwards (a hook's process outliving the umount): a layer must never hold
    # the host's /proc, so anything mounted below the target is unmounted, or the build stops
    leftover = mounts_below(target)
    if leftover:
        print(f"image: unmounting what mmdebstrap left mounted: {' '.join(leftover)}", file=sys.stderr)
        for point in sorted(leftover, reverse=True):
            run(f"umount {point}", ["umount", "--lazy", point])
    # a deterministic file tree for the layer: every time set to the epoch (-xdev: this file system only)
    run("file times to SOURCE_DATE_EPOCH", ["find", str(target), "-xdev", "-exec", "touch", "--no-dereference",
                                             "-d", f"@{epoch}", "{}", "+"])


def assemble(target: pathlib.Path, layout: pathlib.Path, epoch: int) -> str:
    """The OCI image layout (tag `qim`) from the root file system; its manifest digest."""
    if layout.exists():
        shutil.rmtree(layout)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    image = f"{layout}:qim"
    run("umoci init", ["umoci", "init", "--layout", str(layout)])
    run("umoci new", ["umoci", "new", "--image", image])
    run("umoci insert (the root file system as one layer)",
        ["umoci", "insert", "--image", image, "--history.created", created,
         "--history.created_by", "tools/deploy/build_image.py", "--history.comment", f"Debian {SUITE} + qim",
         str(target), "/"])
    run("umoci config", ["umoci", "config", "--image", image, "--no-history", "--created", created,
                         "--config.user", f"{UID}:{UID}", "--config.workingdir", "/",
                         "--config.env", f"PATH={VENV}/bin:/usr/bin:/bin", "--config.env", "PYTHONDONTWRITEBYTECODE=1",
                         "--config.cmd", "qim-gateway", "--author", "QIM",
                         "--config.label", "org.opencontainers.image.title=qim"])
    run("umoci gc", ["umoci", "gc", "--layout", str(layout)])
    index = json.loads((layout / "index.json").read_text())
    return index["manifests"][0]["digest"]


def main(argv: list[str]) -> int:
    """Build the image (module doc); 0, or 1 naming the failed step."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "image"))
    ap.add_argument("--wheel", help="QIM's wheel (default: the newest wheelhouse/qim-*.whl)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    try:
        if os.geteuid() != 0:
            raise BuildError("root is required (mmdebstrap --mode=root, chroot)")
        found = sorted((ROOT / "wheelhouse").glob("qim-*.whl"), key=lambda p: p.stat().st_mtime)
        wheel = pathlib.Path(args.wheel) if args.wheel else (found[-1] if found else None)
        if wheel is None or not wheel.is_file():
            raise BuildError("no QIM wheel: run `make wheel` first (wheelhouse/qim-*.whl)")
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or run(
            "commit time", ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"]).strip())
        wheels(wheel, out / "wheels")
        rootfs(out / "rootfs", out / "wheels", wheel.name, out / "debs", epoch)
        size_mb = int(run("rootfs size", ["du", "-sbx", str(out / "rootfs")]).split()[0]) / 1e6
        digest = assemble(out / "rootfs", out / "oci", epoch)
    except BuildError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    layer = sum(p.stat().st_size for p in (out / "oci" / "blobs" / "sha256").iterdir()) / 1e6
    (out / "digest").write_text(digest + "\n")
    (out / "epoch").write_text(f"{epoch}\n")  # what a rebuild needs to give the same digest
    print(f"image: digest={digest} layer={layer:.1f} MB rootfs={size_mb:.1f} MB layout={out / 'oci'}:qim")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
