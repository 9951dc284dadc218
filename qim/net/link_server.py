"""The one TLS listening path of every node (docs/decisions/0119-one-tls-path.md): a
listener whose accepted connections are ClientLinks (qim/net/link.py: TLS 1.3 with
`ssl.SSLObject` over MemoryBIOs, docs/decisions/0050), for the gateway's client port
(qim/services/gateway/listener.py adds its backlog, file-descriptor limit and TCP
keepalive) and for every internal listener (qim/obs/node.py `ServiceNode.listen`).

What a LinkServer does for each connection:
- the handshake takes the server context of the moment (`TlsContexts.server`: a SIGHUP
  reload serves new connections; None: plaintext) and at most `handshake_timeout` s;
- a failed handshake (plaintext, TLS 1.2, a certificate refused, a slow or vanished
  peer) and one that selected no offered ALPN protocol are counted and logged by the
  node (`tls_refused`: qim_tls_handshake_failures_total{listener, reason}) and the link
  closes; nothing of it stays referenced (decision 0029);
- a finished handshake runs `serve(link)` in a task the node tracks (cancelled on stop:
  the peer sees the connection drop); a node that is stopping aborts new links.
No bytes are lost before the handshake: the link is the protocol of the accepted
socket from its first byte (what decision 0027 had to hand over by hand for
`start_tls`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Awaitable, Callable, Optional, Protocol

from qim.net.link import ClientLink
from qim.net.tls import TlsContexts, alpn_protocols, check_alpn, describe, handshake_failure
from qim.net.transport import limit_unsent, release
from qim.wire.addr import parse_addr

logger = logging.getLogger(__name__)
LinkHandler = Callable[[ClientLink], Awaitable[None]]


class ListenerNode(Protocol):
    """What a LinkServer uses of its node: the public side of ServiceNode
    (qim/obs/node.py) a unit test can stand in for."""

    @property
    def stopping(self) -> bool:
        """True once the node stops: new connections are aborted."""
        ...

    def add_server(self, server: asyncio.AbstractServer) -> None:
        """Close `server` when the node stops."""
        ...

    def track(self, task: asyncio.Task) -> None:
        """Cancel the connection handler `task` when the node stops."""
        ...

    def tls_refused(self, listener: str, reason: str, peer: str, detail: str) -> None:
        """Count and log (rate-limited) one refused handshake."""
        ...


class LinkServer:
    """The LinkListener (qim/net/link_tls.py) of one listening address of `node`: `tls`
    its contexts (None: plaintext), `serve(link)` the connection handler, `chunk_bytes`
    the write-buffer limit of each link (decision 0011), `name` the listener label of
    the refusal metric."""

    backlog = 100  # asyncio's default; the client port's is deeper (gateway/listener.py)

    def __init__(self, node: ListenerNode, tls: Optional[TlsContexts], serve: LinkHandler, chunk_bytes: int,
                 handshake_timeout: float, name: str) -> None:
        self._node, self._tls, self._serve, self._name = node, tls, serve, name
        self.chunk_bytes = chunk_bytes
        self.handshake_timeout = handshake_timeout

    async def start(self, addr: str) -> asyncio.AbstractServer:
        """Listen on 'host:port' (OSError when it cannot be bound); the node closes it on stop."""
        host, port = parse_addr(addr)
        server = await asyncio.get_running_loop().create_server(lambda: ClientLink(self), host, port,
                                                                backlog=self.backlog, start_serving=False)
        for sock in server.sockets:
            self.configure(sock)
        await server.start_serving()
        self._node.add_server(server)
        return server

    def configure(self, sock: socket.socket) -> None:
        """Options of the listening socket, which accepted sockets inherit:
        TCP_NOTSENT_LOWAT of one chunk (decision 0011; no system call per connection)."""
        limit_unsent(sock, self.chunk_bytes)

    def context(self) -> Optional[ssl.SSLContext]:
        """The server context new connections take (None: plaintext)."""
        return self._tls.server if self._tls is not None else None

    def link_ready(self, link: ClientLink) -> None:
        """Handshake done: refuse an ALPN outside the offered ones, else serve the link in
        a task the node tracks."""
        if self._node.stopping:
            link.abort()
            return
        if self._tls is not None and self._tls.alpn and not check_alpn(link, self._tls.alpn):
            self._node.tls_refused(self._name, "alpn", _peer(link),
                                    f"ALPN {'/'.join(alpn_protocols(self._tls.alpn))} not offered")
            link.abort()
            return
        task = asyncio.get_running_loop().create_task(self._serve_link(link))
        self._node.track(task)
        task.add_done_callback(self._ended)

    def link_refused(self, link: ClientLink, exc: BaseException) -> None:
        """A failed handshake: counted and logged by reason (the link is closing)."""
        self._node.tls_refused(self._name, handshake_failure(exc), _peer(link), describe(exc))
        release(exc)

    async def _serve_link(self, link: ClientLink) -> None:
        try:
            await self._serve(link)
        except asyncio.CancelledError:
            link.abort()  # stopping: the peer sees the connection drop
            raise

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            logger.error("%s connection handler failed: %s", self._name, type(exc).__name__, exc_info=exc)


def _peer(link: ClientLink) -> str:
    peer = link.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"
