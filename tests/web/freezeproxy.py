"""A loopback TCP proxy on a thread of its own for the browser tests (the Playwright
API is sync): `freeze()` stops every link open at that moment the way a sleeping
laptop's Wi-Fi does (no FIN, no RST: bytes are held, nothing passes either way), while
links opened afterwards pass normally, so a client that gives up on a frozen link and
dials again gets through. tests/sdk/faultproxy.py models a whole cut link instead."""

from __future__ import annotations

import asyncio
import threading


class FreezeProxy:
    """`addr` ('127.0.0.1:port') forwards to `target` ('host:port'); `close()` ends it."""

    def __init__(self, target: str) -> None:
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.links: list[tuple[asyncio.Event, list[asyncio.StreamWriter]]] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="freezeproxy", daemon=True)
        self.thread.start()
        self.server = self._run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.transport.abort()
            return
        gate = asyncio.Event()
        gate.set()
        self.links.append((gate, [writer, up_writer]))
        self.loop.create_task(self._pump(reader, up_writer, gate))
        self.loop.create_task(self._pump(up_reader, writer, gate))

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, gate: asyncio.Event) -> None:
        try:
            while data := await src.read(65536):
                await gate.wait()  # frozen: held for ever, as a dead radio link holds segments
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()

    def freeze(self) -> int:
        """Freeze every link open now; the number frozen."""
        async def go() -> int:
            for gate, _ in self.links:
                gate.clear()
            return len(self.links)
        return self._run(go())

    def close(self) -> None:
        """Abort every link, stop listening and stop the thread."""
        async def go() -> None:
            self.server.close()
            for _, writers in self.links:
                for w in writers:
                    w.transport.abort()
        self._run(go())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
