"""The OCI image of `make image` (build/image/oci, tag qim; tools/deploy/build_image.py):
its contents and config, a service run from the unpacked bundle as the image says
(its user, environment and a read-only root, in mount and PID namespaces of its own:
no container engine runs on these machines, docs/decisions/0109-oci-image-and-helm-chart.md)
answering /healthz and stopping cleanly on SIGTERM, and a second build from the same
inputs giving the same digest."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from qim.dev.lone_gateway import free_port
from qim.topology import processes

from .conftest import ROOT, tool

OUT = ROOT / "build" / "image"
LAYOUT = OUT / "oci"
UID = 10001


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The image unpacked by umoci into an OCI runtime bundle (config.json + rootfs)."""
    if not (LAYOUT / "index.json").is_file():
        pytest.fail(f"no image in {LAYOUT}: run `make image`")
    dest = tmp_path_factory.mktemp("bundle") / "qim"
    proc = subprocess.run([tool("umoci", "make deploy-tools"), "unpack", "--image", f"{LAYOUT}:qim", str(dest)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return dest


def test_contents_and_config(bundle):
    cfg = json.loads((bundle / "config.json").read_text())
    rootfs = bundle / "rootfs"
    assert cfg["process"]["user"]["uid"] == UID and cfg["process"]["args"] == ["qim-gateway"]
    assert "qim:x:10001:10001:" in (rootfs / "etc" / "passwd").read_text()
    # one image: every process kind of the service table is a command in it
    for row in processes():
        assert (rootfs / "opt/qim/venv/bin" / f"qim-{row.name}").is_file(), row.name
    # no package manager, no pip, no compiler
    for gone in ("usr/bin/dpkg", "usr/bin/apt", "usr/bin/apt-get", "opt/qim/venv/bin/pip",
                 "usr/bin/gcc", "usr/bin/cc", "usr/bin/ld", "usr/bin/as"):
        assert not (rootfs / gone).exists(), gone
    assert not list((rootfs / "opt/qim/venv/lib/python3.11/site-packages").glob("pip*"))
    size = int(subprocess.run(["du", "-sb", str(rootfs)], capture_output=True, text=True).stdout.split()[0])
    print(f"image rootfs: {size / 1e6:.1f} MB", file=sys.stderr)
    assert size < 500e6, "the image grew past 500 MB: what came in?"


def in_image(bundle: Path, args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    """Run `args` from the bundle as its config says: its user and environment (plus
    `env`), the root file system read-only, /tmp a tmpfs, in new mount and PID namespaces
    (loopback shared with the test, which dials it)."""
    cfg = json.loads((bundle / "config.json").read_text())
    user = cfg["process"]["user"]
    envs = [*cfg["process"]["env"], *(f"{k}={v}" for k, v in env.items())]
    r = shlex.quote(str(bundle / "rootfs"))
    script = f"""set -e
mount --make-rprivate /
mount --bind {r} {r}
mount -o remount,bind,ro {r}
mount -t proc proc {r}/proc
mount -t tmpfs -o size=16m,mode=1777 tmpfs {r}/tmp
mount -t tmpfs -o size=1m tmpfs {r}/dev
for n in null zero urandom random; do touch {r}/dev/$n; mount --bind /dev/$n {r}/dev/$n; done
exec chroot --userspec={user['uid']}:{user['gid']} {r} /usr/bin/env -i {' '.join(map(shlex.quote, envs))} \
  {' '.join(map(shlex.quote, args))}"""
    return subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_native_modules_load_in_the_image(bundle):
    code = ("import confluent_kafka, redis, hiredis, cassandra.cluster, uvloop, numpy, pyroaring, zstandard, "
            "blake3, cryptography.hazmat.primitives.asymmetric.ed25519, qim._core.frame as f; print(f.__file__)")
    proc = in_image(bundle, ["python3", "-c", code], {})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip().startswith("/opt/qim/venv/lib/python3.11/site-packages/qim/_core/frame.") and out.strip().endswith(".so")
    proc = in_image(bundle, ["sh", "-c", "touch /opt/qim/x"], {})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Read-only file system" in err, err


def test_a_service_starts_answers_healthz_and_stops_on_sigterm(bundle, private_redis):
    """qim-room (a RoomWriter: Redis only) from the image, on a private Redis."""
    rpc, metrics = free_port(), free_port()
    env = {"QIM_ROOM_LISTEN": f"127.0.0.1:{rpc}", "QIM_ROOM_ADDRS": f"127.0.0.1:{rpc}",
           "QIM_REDIS_ADDR": private_redis.addr,
           "QIM_ROOM_METRICS_LISTEN": f"127.0.0.1:{metrics}", "QIM_INTERNAL_PLAINTEXT_DEV": "1"}
    proc = in_image(bundle, ["qim-room"], env)
    try:
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/healthz", timeout=5) as resp:
                    status = resp.status
                    break
            except OSError:
                time.sleep(0.5)
        assert status == 200, f"no /healthz 200 (exit {proc.poll()}): {proc.stderr.read() if proc.poll() is not None else ''}"
        # the service runs as the image's user, not root
        child = int(subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()[0])
        uids = next(ln for ln in Path(f"/proc/{child}/status").read_text().splitlines() if ln.startswith("Uid:"))
        assert uids.split()[1:] == [str(UID)] * 4, uids
        os.kill(child, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_same_inputs_give_the_same_digest():
    """A second build from the same wheel, pins, Debian packages and epoch (about 3-5
    minutes: mmdebstrap again, the .debs and wheels from the caches), into
    build/image-again, kept for a look when the digests differ."""
    first = (OUT / "digest").read_text().strip()
    epoch = (OUT / "epoch").read_text().strip()
    again = OUT.parent / "image-again"
    if again.exists():
        shutil.rmtree(again)
    again.mkdir()
    for cache in ("debs", "wheels"):
        os.symlink(OUT / cache, again / cache)
    wheel = next((OUT / "wheels").glob("qim-*.whl"))
    proc = subprocess.run([sys.executable, str(ROOT / "tools/deploy/build_image.py"), "--out", str(again),
                           "--wheel", str(wheel)], env=dict(os.environ, SOURCE_DATE_EPOCH=epoch),
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (again / "digest").read_text().strip() == first
