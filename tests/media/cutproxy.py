"""A TCP proxy in front of the object store for the media tests: the MediaService's
QIM_S3_ENDPOINT points at it, so the presigned part URLs it hands out do too, and every
part a device uploads passes through it. It counts the bytes devices send in part
uploads (a connection whose first request is `PUT ...partNumber=`; the service's own
store calls pass uncounted) and, at given totals, runs an action: CUT, or anything else (e.g. SIGKILL a MediaService
node). Thresholds are in bytes sent through the proxy, headers included.

A CUT is a link outage for parts: the connection carrying the part is reset mid-part and
every new part connection is reset at once (nothing read, nothing counted) until the
MediaService lists the upload's parts in the store (S3 ListParts passes through): the
immediate retry aiohttp makes of an idempotent PUT by itself meets the outage too, so
only a client that asks the service which parts the store holds gets through.

A part's request is read whole before it goes on to the store, as a fronting load
balancer that buffers requests does (nginx's proxy_request_buffering): a cut part never
reaches the store half-sent. s3proxy 2.6.0's filesystem backend keeps a half-sent part
as a stray temporary file that makes every later ListParts of that upload fail with 500
(gaul/s3proxy#963); S3 itself drops an unfinished part."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Optional

CUT = "cut"
LIST_PARTS = re.compile(rb"GET [^ ]*[?&]uploadId=")  # S3 ListParts: the service asks what the store holds


@dataclass
class CutProxy:
    """The proxy (module doc) to `upstream` ("host:port"); `events`: (threshold, action)
    pairs in order, action CUT or a callable run once when `sent` passes the threshold."""

    upstream: str
    events: list[tuple[int, object]] = field(default_factory=list)
    sent: int = 0  # bytes devices sent in part uploads, through the proxy
    cuts: int = 0
    refused: int = 0  # part connections dropped at once during an outage
    outage: bool = False
    part_connections: int = 0
    open_parts: int = 0  # part connections still open (a store may still be writing their part)
    port: int = 0
    _server: Optional[asyncio.AbstractServer] = None
    _open: set = field(default_factory=set)

    @property
    def endpoint(self) -> str:
        """The proxy's URL, for QIM_S3_ENDPOINT."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> "CutProxy":
        """Listen on a free port of 127.0.0.1."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and end the open connections."""
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    def _count(self, n: int) -> None:
        """`n` more part bytes arrived: run the actions now due (CUT raises)."""
        self.sent += n
        while self.events and self.sent >= self.events[0][0]:
            action = self.events.pop(0)[1]
            if action == CUT:
                self.cuts += 1
                self.outage = True
                raise ConnectionAbortedError("cut by the test")
            assert callable(action)
            action()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            await self._pipe(reader, writer)
        except asyncio.CancelledError:
            writer.transport.abort()  # stopped by stop(): the connection ends with the proxy
        finally:
            self._open.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.upstream.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        if self.outage:  # the link is down for parts until the service lists them (module doc)
            self.refused += 1
            for w in (writer, up_writer):
                w.transport.abort()
            return
        first = await reader.read(64 * 1024)
        line = first.split(b"\r\n", 1)[0]
        counted = line.startswith(b"PUT ") and b"partNumber=" in line
        self.part_connections += counted
        self.open_parts += counted
        try:
            await self._relay(reader, writer, up_reader, up_writer, first, counted)
        finally:
            self.open_parts -= counted

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        first: bytes,
        counted: bool,
    ) -> None:

        async def down() -> None:
            try:
                while data := await up_reader.read(64 * 1024):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            writer.close()  # the store closed: so does the device's side

        async def up(data: bytes) -> None:
            buf = bytearray(data)
            while True:
                if not counted:  # the service's own store calls: passed on as they come
                    if LIST_PARTS.search(buf):
                        self.outage = False
                    if buf:
                        up_writer.write(bytes(buf))
                        await up_writer.drain()
                    buf = bytearray(await reader.read(64 * 1024))
                    if not buf:
                        return
                    continue
                # a part: its whole request is read before any of it goes on (module doc)
                while b"\r\n\r\n" not in buf:
                    more = await reader.read(64 * 1024)
                    if not more:
                        return
                    buf += more
                    self._count(len(more))
                head_end = buf.index(b"\r\n\r\n") + 4
                length = _content_length(bytes(buf[:head_end]))
                while len(buf) < head_end + length:
                    more = await reader.read(64 * 1024)
                    if not more:
                        return
                    buf += more
                    self._count(len(more))
                up_writer.write(bytes(buf[: head_end + length]))
                await up_writer.drain()
                buf = buf[head_end + length :]
                if not buf:
                    buf = bytearray(await reader.read(64 * 1024))
                    if not buf:
                        return
                    self._count(len(buf))

        back = asyncio.ensure_future(down())
        try:
            if counted:
                self._count(len(first))
            await up(first)
        except (ConnectionError, OSError):
            writer.transport.abort()  # a cut is a reset of the device's side, mid-part
        try:
            # the store's side ends cleanly: only whole requests went to it, and one it is
            # still reading must not be reset under it (s3proxy would keep half a part)
            if up_writer.can_write_eof() and not up_writer.is_closing():
                up_writer.write_eof()
            await asyncio.wait_for(back, 60)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass
        finally:
            back.cancel()
            for w in (writer, up_writer):
                w.transport.abort()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    raise AssertionError(f"a part upload without Content-Length: {head[:200]!r}")
