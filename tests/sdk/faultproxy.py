"""A loopback TCP proxy that models a device's link, for SDK tests against a real or
fake gateway: one-way delay, bandwidth each way, and faults that cut and restore it.

- `delay_s`: every chunk is delivered `delay_s` after it was read (each direction).
- `down_bps` / `up_bps`: bytes per second toward the client / toward the target (0: no
  limit); the proxy reads no faster than it delivers, so the link's queue is its own.
- `cut()`: a blackhole. Nothing passes either way (bytes are held, as a dead radio
  link holds TCP segments for retransmission) and new connections are accepted but
  pass nothing; `restore()` lets the held bytes go on in order. `cut(reset=True)`:
  every connection is aborted (RST) and new ones are aborted at once until `restore()`.
It speaks TCP only: TLS passes through end to end. `accepted` counts connections.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from qim.net.framed import parse_addr

TICK_S = 0.05


class FaultProxy:
    """`await start()` -> 'host:port' to connect to; `await stop()` ends every link."""

    def __init__(self, target: str, *, delay_s: float = 0.0, down_bps: int = 0, up_bps: int = 0) -> None:
        self.target = parse_addr(target)
        self.delay_s, self.down_bps, self.up_bps = delay_s, down_bps, up_bps
        self.server: Optional[asyncio.AbstractServer] = None
        self.accepted = 0
        self._open = asyncio.Event()
        self._open.set()
        self._reset = False
        self._tasks: set[asyncio.Task] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        self._abort_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def is_cut(self) -> bool:
        return not self._open.is_set()

    def cut(self, reset: bool = False) -> None:
        """Cut the link (module docstring); `reset`: abort every connection too."""
        self._open.clear()
        self._reset = reset
        if reset:
            self._abort_all()

    def restore(self) -> None:
        """The link is back: held bytes go on, new connections pass."""
        self._reset = False
        self._open.set()

    def _abort_all(self) -> None:
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._reset:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers += [writer, up_writer]
        self._spawn(self._pipe(reader, up_writer, self.up_bps))
        self._spawn(self._pipe(up_reader, writer, self.down_bps))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, bps: int) -> None:
        """Read `src` into a queue stamped with the delivery time; deliver in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        room = asyncio.Event()  # with a rate, read no further ahead than about one tick
        room.set()

        async def read() -> None:
            try:
                while True:
                    await room.wait()
                    data = await src.read(max(1, int(bps * TICK_S)) if bps else 65536)
                    queue.put_nowait((loop.time() + self.delay_s, data))
                    if not data:
                        return
                    if bps and queue.qsize() > 1:
                        room.clear()
            except (ConnectionError, OSError):
                queue.put_nowait((loop.time(), b""))

        reader = loop.create_task(read())
        try:
            while True:
                due, data = await queue.get()
                if queue.qsize() <= 1:
                    room.set()
                await self._open.wait()
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                await self._open.wait()
                if not data:
                    return
                dst.write(data)
                await dst.drain()
                if bps:
                    await asyncio.sleep(len(data) / bps)
        except (ConnectionError, OSError):
            pass
        finally:
            reader.cancel()
            dst.close()
