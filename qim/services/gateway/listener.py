"""The client port's listener: one ClientLink per accepted connection (qim/net/link.py;
docs/decisions/0050-conn-lean-client-links.md), served by the ConnectionNode once its
TLS handshake finished and selected one of the node's transports.

Like ServiceNode.listen, which every internal listener keeps using: each connection
handler is tracked by the node (cancelled on stop, its peer sees the connection drop);
a failed handshake (plaintext, TLS 1.2, a slow or vanished peer) and a handshake that
selected no offered ALPN protocol are counted in qim_tls_handshake_failures_total and
logged at most once a second; new connections take the server context of the moment
(SIGHUP reloads). The accept queue is CLIENT_BACKLOG deep (the kernel caps it at
net.core.somaxconn): with asyncio's default of 100, a reconnect storm overflowed it and
every dropped SYN cost its client a 1 s retransmission (docs/operations.md "Many
connections"). Each connection is one file descriptor: before listening, the soft
RLIMIT_NOFILE is raised to the hard limit (a systemd service's soft default of 1,024
would refuse the 1,021st device), and the limit is logged. TCP keepalive and
TCP_USER_TIMEOUT are set on the listening socket too (keepalive.py; docs/decisions/0077):
the kernel ends a connection whose peer vanished.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
from typing import Awaitable, Callable, Optional, Protocol

from qim.net.link import ClientLink
from qim.net.tls import TlsContexts, alpn_protocols, check_alpn, describe, handshake_failure
from qim.net.transport import limit_unsent, release
from qim.services.gateway.keepalive import tcp_keepalive
from qim.wire.addr import parse_addr

logger = logging.getLogger(__name__)
CLIENT_BACKLOG = 4096
LinkHandler = Callable[[ClientLink], Awaitable[None]]


class ListenerNode(Protocol):
    """What a ClientListener uses of its node: the public side of ServiceNode
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


class ClientListener:
    """The LinkListener (qim/net/link.py) of one ConnectionNode's client port: `node`
    (its connection tracking, stop flag and TLS refusal counter), `tls` (None:
    plaintext development), `serve(link)` the connection handler, `heartbeat_s` the
    gateway's heartbeat (TCP keepalive; 0: the kernel's defaults)."""

    def __init__(self, node: ListenerNode, tls: Optional[TlsContexts], serve: LinkHandler, chunk_bytes: int,
                 handshake_timeout: float, name: str = "client", heartbeat_s: int = 0) -> None:
        self._node, self._tls, self._serve, self._name = node, tls, serve, name
        self.heartbeat_s = heartbeat_s
        self.chunk_bytes = chunk_bytes
        self.handshake_timeout = handshake_timeout

    async def start(self, addr: str) -> asyncio.AbstractServer:
        """Listen on 'host:port' (OSError when it cannot be bound); the node closes it on stop."""
        host, port = parse_addr(addr)
        logger.info("client port %s: at most %d file descriptors (connections)", addr, raise_nofile_limit())
        server = await asyncio.get_running_loop().create_server(lambda: ClientLink(self), host, port,
                                                                backlog=CLIENT_BACKLOG, start_serving=False)
        for sock in server.sockets:  # accepted sockets inherit them: no system call per login
            limit_unsent(sock, self.chunk_bytes)
            if self.heartbeat_s:
                tcp_keepalive(sock, self.heartbeat_s)
        await server.start_serving()
        self._node.add_server(server)
        return server

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
        task.add_done_callback(_ended)

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


def _ended(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        logger.error("client connection handler failed: %s", type(exc).__name__, exc_info=exc)


def raise_nofile_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; the soft limit after
    (unchanged when the hard one is infinite or cannot be set: the limit stays as it was)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # RLIM_INFINITY above fs.nr_open: keep the soft limit
            logger.warning("cannot raise the file-descriptor limit to %s: %s", hard, exc)
    return soft


def _peer(link: ClientLink) -> str:
    peer = link.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"
