"""A TCP proxy that delivers the server's bytes to the client at a fixed rate (a slow
device link), for SDK tests. Client -> server bytes pass unthrottled."""

from __future__ import annotations

import asyncio
from typing import Optional

from qim.net.framed import parse_addr

TICK_S = 0.05


class ThrottleProxy:
    """`await start()` returns the proxy's 'host:port'; `down_bps` bytes per second flow
    from the target to each client (the proxy reads the target no faster)."""

    def __init__(self, target: str, down_bps: int) -> None:
        self.target = parse_addr(target)
        self.down_bps = down_bps
        self.server: Optional[asyncio.AbstractServer] = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        self.server.close()
        for w in self._writers:
            w.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_writer]
        for coro in (self._pipe(reader, up_writer, 0), self._pipe(up_reader, writer, self.down_bps)):
            task = asyncio.get_running_loop().create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, bps: int) -> None:
        try:
            while True:
                data = await src.read(max(1, int(bps * TICK_S)) if bps else 65536)
                if not data:
                    break
                dst.write(data)
                await dst.drain()
                if bps:
                    await asyncio.sleep(len(data) / bps)
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()
