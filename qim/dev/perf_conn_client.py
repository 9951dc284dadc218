"""The load generator of the `make perf` connection step (qim/dev/perf_conn.py): a lean
uvloop client that opens many TLS connections to a gateway, logs each in (AUTH) and then
sits on it, so that the gateway's cost per idle connection and per login is what is
measured, not the client's.

Lean means: one asyncio.Protocol per connection (no streams, no tasks), tokens signed
before the timed phase, the frames of qim/_core/frame.pyx encoded once. The parent
drives it over stdin/stdout, one JSON object per line:

    parent -> {"cmd": "prepare", "count": N}  child -> {"prepared": N}   (signs N tokens, untimed)
    parent -> {"cmd": "open"}                 child -> {"opened": ok, "failed": f, "wall_s": ..., "cpu_s": ...,
                                                          "errors": {reason: n}}   (the prepared ones)
    parent -> {"cmd": "ping"}                 child -> {"alive": n, "pong": n, "wall_s": ...}
    parent -> {"cmd": "quit"}                 (closes everything, exits 0)

`--source` binds the connections to one loopback source address (127.0.0.2, ...): a
source address has about 28,000 ephemeral ports toward one gateway port.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import ssl
import sys
import time
from typing import Optional, cast

import uvloop

from qim._core import frame as frame_codec
from qim.net.tls import client_port_context
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token

HANDSHAKE_TIMEOUT_S = 60.0
PING_ID = 7


def _frame(opcode: int, request_id: int, body: bytes) -> bytes:
    return b"".join(frame_codec.encode_frame(opcode, request_id, body, False, 64 * 1024))


PING = _frame(Opcode.PING, PING_ID, b"")


class IdleLink(asyncio.Protocol):
    """One connection: AUTH on connect, then nothing but an occasional PING from the parent.
    `authed` resolves True on AUTH_OK, False on anything else (the reason in `error`)."""

    def __init__(self, auth: bytes, authed: asyncio.Future) -> None:
        self.auth, self.authed = auth, authed
        self.transport: Optional[asyncio.Transport] = None
        self.decoder = frame_codec.FrameDecoder()
        self.pong: Optional[asyncio.Future] = None
        self.error = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the prepared AUTH at once."""
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self.transport.write(self.auth)
        self.auth = b""

    def data_received(self, data: bytes) -> None:
        """AUTH_OK or the refusal resolves `authed`; a PONG resolves the pending ping."""
        for opcode, _request_id, _ in self.decoder.feed(data):
            if not self.authed.done():
                self.error = "" if opcode == Opcode.AUTH_OK else f"opcode 0x{opcode:04x}"
                self.authed.set_result(opcode == Opcode.AUTH_OK)
            elif opcode == Opcode.PONG and self.pong is not None and not self.pong.done():
                self.pong.set_result(True)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        """Whatever still waits resolves False (`error` = "closed")."""
        self.transport = None
        for fut in (self.authed, self.pong):
            if fut is not None and not fut.done():
                self.error = "closed"
                fut.set_result(False)


class Client:
    """The connections of this process (see the module doc)."""

    def __init__(self, host: str, port: int, ca_file: str, key: str, source: str, first_user: int,
                 concurrency: int) -> None:
        self.host, self.port, self.source = host, port, source
        self.tls = client_port_context(ca_file)
        self.key, self.next_user, self.concurrency = key, first_user, concurrency
        self.links: list[IdleLink] = []
        self.prepared: collections.deque[bytes] = collections.deque()

    def prepare(self, count: int) -> dict:
        """Sign `count` tokens (one user each) and encode their AUTH frames."""
        for _ in range(count):
            token = issue_dev_token(self.key, 0, self.next_user, 1)
            self.next_user += 1
            self.prepared.append(_frame(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString()))
        return {"prepared": len(self.prepared)}

    async def _one(self, auth: bytes, tls: ssl.SSLContext, errors: collections.Counter) -> None:
        loop = asyncio.get_running_loop()
        authed = loop.create_future()
        link = IdleLink(auth, authed)
        try:
            await loop.create_connection(lambda: link, self.host, self.port, ssl=tls, server_hostname=self.host,
                                         local_addr=(self.source, 0), ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
            ok = await asyncio.wait_for(authed, HANDSHAKE_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            errors[type(exc).__name__] += 1
            return
        if ok:
            self.links.append(link)
        else:
            errors[link.error or "refused"] += 1

    async def open(self) -> dict:
        """Open and log in the prepared connections, `concurrency` handshakes at a time."""
        errors: collections.Counter = collections.Counter()
        before, t0 = _cpu_s(), time.monotonic()
        queue, self.prepared = self.prepared, collections.deque()
        count = len(queue)

        async def worker() -> None:
            while queue:
                await self._one(queue.popleft(), self.tls, errors)

        await asyncio.gather(*(worker() for _ in range(min(self.concurrency, count))))
        return {"opened": count - sum(errors.values()), "failed": sum(errors.values()), "errors": dict(errors),
                "wall_s": round(time.monotonic() - t0, 3), "cpu_s": round(_cpu_s() - before, 3)}

    async def ping(self) -> dict:
        """PING every connection; how many are alive and answered."""
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        waits = []
        for link in self.links:
            if link.transport is None:
                continue
            link.pong = loop.create_future()
            link.transport.write(PING)
            waits.append(link.pong)
        try:
            answered = await asyncio.wait_for(asyncio.gather(*waits), HANDSHAKE_TIMEOUT_S)
        except asyncio.TimeoutError:
            answered = [w.done() and w.result() for w in waits]
        return {"alive": len(waits), "pong": sum(1 for a in answered if a), "wall_s": round(time.monotonic() - t0, 3)}

    def close(self) -> None:
        """Abort every connection (the gateway sees them drop)."""
        for link in self.links:
            if link.transport is not None:
                link.transport.abort()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _serve(client: Client) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    while line := await reader.readline():
        cmd = json.loads(line)
        if cmd["cmd"] == "prepare":
            reply = client.prepare(int(cmd["count"]))
        elif cmd["cmd"] == "open":
            reply = await client.open()
        elif cmd["cmd"] == "ping":
            reply = await client.ping()
        else:
            break
        print(json.dumps(reply), flush=True)
    client.close()


def main() -> None:
    """Run one client process (module doc)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True)
    p.add_argument("--ca-file", required=True)
    p.add_argument("--key", required=True, help="the development token key (PEM)")
    p.add_argument("--source", default="127.0.0.1")
    p.add_argument("--first-user", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=64)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = args.addr.rsplit(":", 1)
    client = Client(host, int(port), args.ca_file, args.key, args.source, args.first_user, args.concurrency)
    uvloop.run(_serve(client))


if __name__ == "__main__":
    main()
