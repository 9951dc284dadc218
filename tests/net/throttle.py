"""A loopback TCP proxy that models a slow downlink.

client -> upstream bytes pass at full speed; upstream -> client bytes are read from the
upstream socket at `rate` bytes/s only. The proxy reads with `sock_recv` straight from
the kernel (no user-space read-ahead), and the upstream socket's receive buffer is set
to `link_buffer` bytes before it connects: that kernel buffer is the link's queue, the
only bytes in flight that the server no longer controls.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Optional

TICK_S = 0.05


class ThrottleProxy:
    """`await start()` -> "host:port" to connect to; `close()` stops it and every link.

    `received[i]` counts the bytes delivered to the client of the i-th connection.
    """

    def __init__(self, upstream: str, rate: int, link_buffer: int = 64 * 1024) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self.rate = rate
        self._link_buffer = link_buffer
        self._server: Optional[socket.socket] = None
        self._tasks: set[asyncio.Task] = set()
        self._socks: list[socket.socket] = []
        self.received: list[int] = []

    async def start(self) -> str:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        srv.setblocking(False)
        self._server = srv
        self._spawn(self._accept())
        return "127.0.0.1:%d" % srv.getsockname()[1]

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            client, _ = await loop.sock_accept(self._server)
            client.setblocking(False)
            up = socket.socket()
            up.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._link_buffer)
            up.setblocking(False)
            await loop.sock_connect(up, self._upstream)
            self._socks += [client, up]
            index = len(self.received)
            self.received.append(0)
            self._spawn(self._pump_up(client, up))
            self._spawn(self._pump_down(up, client, index))

    async def _pump_up(self, client: socket.socket, up: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await loop.sock_recv(client, 65536):
                await loop.sock_sendall(up, data)
        except OSError:
            pass
        finally:
            _shut(up)

    async def _pump_down(self, up: socket.socket, client: socket.socket, index: int) -> None:
        loop = asyncio.get_running_loop()
        per_tick = max(1, int(self.rate * TICK_S))
        next_tick = loop.time()
        try:
            while True:
                budget = per_tick
                while budget > 0:
                    data = await loop.sock_recv(up, budget)
                    if not data:
                        return
                    await loop.sock_sendall(client, data)
                    self.received[index] += len(data)
                    budget -= len(data)
                next_tick += TICK_S
                await asyncio.sleep(max(0.0, next_tick - loop.time()))
        except OSError:
            pass
        finally:
            _shut(client)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for s in self._socks + ([self._server] if self._server else []):
            s.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
