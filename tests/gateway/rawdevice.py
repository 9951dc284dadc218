"""A raw TLS client device for tests against a real qim-gateway (a lone one:
qim/dev/lone_gateway.py): AUTH with a development token, PINGs, and the gateway's
/metrics read by name."""

from __future__ import annotations

import asyncio
import time
import urllib.request

from qim._core import frame as frame_codec
from qim.net.tls import client_port_context
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token


def metric(gw, name: str) -> float:
    """The sum of the samples of `name` on the gateway's /metrics (0.0 when absent)."""
    text = urllib.request.urlopen(f"http://{gw.metrics}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"))


async def poll(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.5)


class Device:
    """One raw TLS client connection: AUTH, then PINGs while `alive`."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = frame_codec.FrameDecoder()
        self.frames: list = []
        self._pinger = None

    @classmethod
    async def open(cls, gw, addr: str) -> "Device":
        """A TLS connection to `addr` (the gateway `gw`'s port or a proxy to it), no AUTH yet."""
        host, port = addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), ssl=client_port_context(gw.ca_file),
                                                       server_hostname="127.0.0.1")
        return cls(reader, writer)

    def send_auth(self, gw, user: int, device: int) -> None:
        self.send(Opcode.AUTH, 1, connection_pb2.Auth(token=issue_dev_token(gw.token_key, 0, user, device)))

    async def auth_reply(self):
        """(self, None) on AUTH_OK, (None, Error) when refused (the connection aborted)."""
        opcode, body = await self.reply(1)
        if opcode == Opcode.AUTH_OK:
            return self, None
        self.writer.transport.abort()
        return None, common_pb2.Error.FromString(body)

    @classmethod
    async def login(cls, gw, addr: str, user: int, device: int):
        """(Device, None) on AUTH_OK, (None, Error) when refused."""
        dev = await cls.open(gw, addr)
        dev.send_auth(gw, user, device)
        return await dev.auth_reply()

    def send(self, opcode: int, rid: int, msg) -> None:
        self.writer.write(b"".join(frame_codec.encode_frame(opcode, rid, msg.SerializeToString(), False, 65536)))

    async def reply(self, rid: int, timeout: float = 30) -> tuple[int, bytes]:
        async def read():
            while True:
                for opcode, got, body in self.frames:
                    if got == rid:
                        return opcode, body
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("closed by the gateway")
                self.frames.extend(self.decoder.feed(data))
        return await asyncio.wait_for(read(), timeout)

    def keep_alive(self) -> None:
        async def ping():
            rid = 100
            while True:
                await asyncio.sleep(1.0)
                rid += 1
                self.send(Opcode.PING, rid, connection_pb2.Ping())
                await self.reply(rid)
        self._pinger = asyncio.get_running_loop().create_task(ping())

    def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
        self.writer.transport.abort()
