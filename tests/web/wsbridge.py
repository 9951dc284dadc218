"""A stand-in for the gateway's WebSocket listener, for the browser tests of a stack
whose gateway has none (tests/web/conftest.py uses it only then, and says so).

`python -m tests.web.wsbridge PORT` with $QIM_GATEWAY_ADDR (host:port of the gateway's
TLS client port) and $QIM_CA_FILE: every WebSocket connection on ws://127.0.0.1:PORT/
becomes one TLS connection (ALPN qim/1) to the gateway; each binary message is written
as it is, and the gateway's byte stream is cut at chunk boundaries (20-byte header +
body_len) into one binary message per chunk, as docs/protocol.md "WebSocket" carries
frames. A text message or a bad header closes both sides. AUTH, limits and everything
else are the real gateway's. Loopback only; stops with its parent (SIGTERM).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys

import websockets

from qim._core import frame
from qim.errors import FrameError

HEADER = 20


async def _bridge(ws, host: str, port: int, ctx: ssl.SSLContext | None) -> None:
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None)

    async def up() -> None:
        async for message in ws:
            if isinstance(message, str):
                return  # the protocol is binary only
            writer.write(message)
            await writer.drain()

    async def down() -> None:
        buf = b""
        while data := await reader.read(1 << 16):
            buf += data
            while len(buf) >= HEADER:
                size = HEADER + frame.decode_header(buf[:HEADER])[4]
                if len(buf) < size:
                    break
                await ws.send(buf[:size])
                buf = buf[size:]

    tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        writer.close()
        await ws.close()


async def main(port: int) -> None:
    """Serve until cancelled."""
    host, gw_port = os.environ["QIM_GATEWAY_ADDR"].rsplit(":", 1)
    ctx = None
    if os.environ.get("QIM_CA_FILE"):
        ctx = ssl.create_default_context(cafile=os.environ["QIM_CA_FILE"])
        ctx.set_alpn_protocols(["qim/1"])

    async def handler(ws) -> None:
        try:
            await _bridge(ws, host, int(gw_port), ctx)
        except (OSError, ValueError, FrameError) as exc:
            await ws.close(1011, f"gateway: {exc.__class__.__name__}")

    async with websockets.serve(handler, "127.0.0.1", port, compression=None, max_size=1 << 17):
        print(f"wsbridge: ws://127.0.0.1:{port}/ -> {host}:{gw_port}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
