"""A MediaService node SIGKILLed in the middle of an upload's part: qim.sdk, given both
nodes (`MediaNodes`, as `client.media_urls`), finishes the upload on the other one
(issue 40 done-when; docs/decisions/0147). Two real `qim-media` processes on this
module's s3proxy (behind a CutProxy) and the test's Redis: node one starts the upload,
is killed when half of part two has gone to the store, and the link drops in the same
part; the SDK asks node two which parts the store holds, sends the rest there and
completes there. The object is byte-exact and no stored part went twice."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from qim.config.env import Env
from qim.dev._proc import death_wrapper, pick_ports
from qim.sdk.media_http import MediaNodes
from qim.sdk.media_parts import upload_large
from qim.services.media.multipart import PART_BYTES
from qim.stores.s3 import ObjectStore, S3Config
from tests.media.cutproxy import CUT, CutProxy
from tests.media.helpers import token

SLACK = 256 * 1024


def _spawn(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """A qim-media process of `env` on a free port, its output in `log`; (process, base URL)."""
    port = pick_ports(1)[0]
    full = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    full.update(env, QIM_MEDIA_METRICS_LISTEN=f"127.0.0.1:{port}", QIM_NODE_NAME=f"media-{port}")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*death_wrapper(True), sys.executable, "-m", "qim.app", "media"],
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, f"http://127.0.0.1:{port}"


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


async def _ready(base: str, proc: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            assert proc.poll() is None, f"qim-media exited {proc.returncode}: {_tail(log)}"
            try:
                async with http.get(f"{base}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            assert time.monotonic() < deadline, f"qim-media at {base} not ready: {_tail(log)}"
            await asyncio.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_node_killed_mid_part_the_upload_finishes_on_the_other(media_env, s3_engine, tmp_path) -> None:
    env, key = media_env
    data = os.urandom(3 * PART_BYTES + 4321)  # four parts
    bearer = token(key, 41)["Authorization"].split()[1]
    procs: list[subprocess.Popen] = []

    async def run() -> None:
        half_of_two = PART_BYTES + PART_BYTES // 2
        proxy = CutProxy(s3_engine.endpoint.split("//", 1)[1])
        proxy.events = [(half_of_two, lambda: os.kill(procs[0].pid, signal.SIGKILL)), (half_of_two + 1, CUT)]
        await proxy.start()
        node_env = dict(env, QIM_S3_ENDPOINT=proxy.endpoint)
        try:
            bases = []
            for name in ("one", "two"):  # one after the other: the first creates the bucket
                proc, base = _spawn(node_env, tmp_path / f"{name}.log")
                procs.append(proc)
                bases.append(base)
                await _ready(base, proc, tmp_path / f"{name}.log")
            nodes = MediaNodes(bases, budget_s=90)
            told: list[tuple[int, int]] = []
            up = await upload_large(nodes, bearer, data, name="k.bin", progress=lambda s, t: told.append((s, t)))
            assert await asyncio.to_thread(procs[0].wait, 30) == -signal.SIGKILL
            assert proxy.cuts == 1 and nodes.current == bases[1] and nodes.moves >= 1
            assert (up.ref.size, up.ref.sha256, up.ref.name) == (len(data), hashlib.sha256(data).digest(), "k.bin")
            assert told[-1] == (len(data), len(data))
            # every part once, plus the half of part two the cut lost
            assert len(data) + PART_BYTES // 2 <= proxy.sent <= len(data) + PART_BYTES // 2 + SLACK, proxy.sent
            store = ObjectStore(S3Config.from_env(Env(dict(env))))
            assert await store.get("o/" + up.ref.media_id) == data
        finally:
            await proxy.stop()

    try:
        asyncio.run(run())
    finally:
        for proc in procs:
            _stop(proc)
