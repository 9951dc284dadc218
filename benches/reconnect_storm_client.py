"""The devices of benches/reconnect_storm.py: one process holding many idle TLS
connections to a gateway, each of which, when the gateway drops it, reconnects with the
SDK's reconnect policy (`--policy new`: qim.sdk.reconnect.reconnect_wait, docs/decisions/0078;
`old`: the policy before it, a first retry after 25–75 ms) and honours the gateway's
retry-after hints, exactly as the SDK's supervisor does. Lean: one asyncio.Protocol per
connection, tokens signed before anything is timed.

Driven over stdin/stdout, one JSON object per line:

    parent -> {"cmd": "open"}    child -> {"opened": N}         (all N connected and authenticated)
    parent -> {"cmd": "status"}  child -> {"lost": l, "back": b}
    parent -> {"cmd": "report"}  child -> {"waits": [...], "back_at": [...], "attempts": [...],
                                            "refused": r, "failed": f}   (times: time.monotonic())
    parent -> {"cmd": "quit"}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import Optional, cast

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim._core import frame as frame_codec  # noqa: E402
from qim.net.tls import client_port_context  # noqa: E402
from qim.proto.v1 import common_pb2, connection_pb2  # noqa: E402
from qim.protocol import Opcode  # noqa: E402
from qim.sdk.connection import CONNECT_TIMEOUT_S  # noqa: E402
from qim.sdk.reconnect import jittered, reconnect_wait  # noqa: E402
from qim.wire.devtoken import issue_dev_token  # noqa: E402

START_S, CAP_S = 0.05, 2.0  # the SDK's default reconnect_backoff (qim/sdk/runtime.py)


class Link(asyncio.Protocol):
    """One connection: AUTH on connect; `authed` resolves to (True, 0) on AUTH_OK or
    (False, retry_after_ms) on a refusal or a close; `lost` resolves when it drops."""

    def __init__(self, auth: bytes) -> None:
        loop = asyncio.get_running_loop()
        self.auth = auth
        self.authed: asyncio.Future = loop.create_future()
        self.lost: asyncio.Future = loop.create_future()
        self.decoder = frame_codec.FrameDecoder()
        self.transport: Optional[asyncio.Transport] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.auth)

    def data_received(self, data: bytes) -> None:
        for opcode, _, body in self.decoder.feed(data):
            if not self.authed.done():
                hint = 0 if opcode == Opcode.AUTH_OK else common_pb2.Error.FromString(body).retry_after_ms
                self.authed.set_result((opcode == Opcode.AUTH_OK, hint))

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.transport = None
        if not self.authed.done():
            self.authed.set_result((False, 0))
        if not self.lost.done():
            self.lost.set_result(None)


class Devices:
    """`count` devices (users first_user, first_user + 1, ...; device 1 each)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.host, port = args.addr.rsplit(":", 1)
        self.port, self.source, self.policy = int(port), args.source, args.policy
        self.tls = client_port_context(args.ca_file)
        self.auths = [b"".join(frame_codec.encode_frame(Opcode.AUTH, 1, connection_pb2.Auth(
            token=issue_dev_token(args.key, 0, u, 1)).SerializeToString(), False, 65536))
            for u in range(args.first_user, args.first_user + args.count)]
        self.lost = self.back = self.refused = self.failed = 0
        self.waits: list[float] = []
        self.back_at: list[float] = []
        self.attempts: list[int] = []

    async def attempt(self, i: int) -> tuple[Optional[Link], int]:
        """One connect + AUTH, bounded as the SDK bounds it: (link, 0) or (None, hint ms)."""
        loop = asyncio.get_running_loop()
        link = Link(self.auths[i])
        try:
            await loop.create_connection(lambda: link, self.host, self.port, ssl=self.tls,
                                         server_hostname=self.host, local_addr=(self.source, 0),
                                         ssl_handshake_timeout=CONNECT_TIMEOUT_S)
            ok, hint = await asyncio.wait_for(asyncio.shield(link.authed), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            ok, hint = False, 0
        if ok:
            return link, 0
        if link.transport is not None:
            link.transport.abort()
        if hint:
            self.refused += 1
        else:
            self.failed += 1
        return None, hint

    async def open(self) -> dict:
        sem = asyncio.Semaphore(64)
        links: list[Optional[Link]] = [None] * len(self.auths)

        async def one(i: int) -> None:
            async with sem:
                while links[i] is None:
                    links[i], hint = await self.attempt(i)
                    if links[i] is None:
                        await asyncio.sleep(max(0.2, hint / 1000))

        await asyncio.gather(*(one(i) for i in range(len(self.auths))))
        self.refused = self.failed = 0  # count the storm only
        for i, link in enumerate(links):
            asyncio.get_running_loop().create_task(self.device(i, cast(Link, link)))
        return {"opened": len(links)}

    def wait_s(self, delay: float, hint_s: float, first: bool) -> float:
        if self.policy == "old":  # qim/sdk/reconnect.py before decision 0078
            return max(jittered(delay), hint_s)
        return reconnect_wait(delay, hint_s, first, CAP_S)

    async def device(self, i: int, link: Link) -> None:
        """Wait for the drop, then reconnect as the SDK's supervisor does."""
        while True:
            await link.lost
            lost_at = time.monotonic()
            self.lost += 1
            delay, hint, first, tries = START_S, 0, True, 0
            while True:
                await asyncio.sleep(self.wait_s(delay, hint / 1000, first))
                first, delay = False, min(delay * 2, CAP_S)
                tries += 1
                new, hint = await self.attempt(i)
                if new is not None:
                    break
            link = new
            now = time.monotonic()
            self.back += 1
            self.waits.append(now - lost_at)
            self.back_at.append(now)
            self.attempts.append(tries)


async def serve(devices: Devices) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        cmd = json.loads(line)["cmd"]
        if cmd == "open":
            reply = await devices.open()
        elif cmd == "status":
            reply = {"lost": devices.lost, "back": devices.back}
        elif cmd == "report":
            reply = {"waits": devices.waits, "back_at": devices.back_at, "attempts": devices.attempts,
                     "refused": devices.refused, "failed": devices.failed}
        else:
            return
        print(json.dumps(reply), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True)
    p.add_argument("--ca-file", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--source", default="127.0.0.1")
    p.add_argument("--first-user", type=int, default=1)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--policy", choices=("new", "old"), default="new")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    random.seed(args.seed)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(serve(Devices(args)))


if __name__ == "__main__":
    main()
