"""A TLS client over a raw non-blocking socket, through memory BIOs (tests that need to
control the socket itself: a small receive buffer, exact bytes on the wire, a send that
blocks). Nothing is buffered in user space beyond what the socket gave."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Optional


class TlsPeer:
    """The client side of a TLS connection over a non-blocking raw socket, decrypting
    through memory BIOs (nothing buffered in user space beyond what it was given)."""

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext) -> None:
        self.sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self._in, self._out, server_side=False, server_hostname="127.0.0.1")

    async def _flush(self) -> None:
        data = self._out.read()
        if data:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def handshake(self) -> None:
        """Run the client side of the handshake to its end (AssertionError if the peer closes)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                raw = await loop.sock_recv(self.sock, 65536)
                assert raw, "closed during the handshake"
                self._in.write(raw)
        await self._flush()

    async def recv(self, n: int) -> bytes:
        """Plaintext from at most `n` raw bytes (b"" while a record is incomplete)."""
        raw = await asyncio.get_running_loop().sock_recv(self.sock, n)
        assert raw, "closed"
        self._in.write(raw)
        out = b""
        while True:
            try:
                out += self.obj.read(65536)
            except ssl.SSLWantReadError:
                return out

    async def sendall(self, data: bytes) -> None:
        """Encrypt `data` and send every byte (blocks while the peer does not read)."""
        self.obj.write(data)
        await self._flush()


async def tls_socket(addr: tuple[str, int], ctx: ssl.SSLContext, rcvbuf: Optional[int] = None) -> TlsPeer:
    """Connect a raw socket (with SO_RCVBUF = `rcvbuf` when given) and handshake."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, addr)
    peer = TlsPeer(sock, ctx)
    await peer.handshake()
    return peer
