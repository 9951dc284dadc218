"""The client port's listener: one ClientLink per accepted connection (qim/net/link.py;
docs/decisions/0050-conn-lean-client-links.md), served by the ConnectionNode once its
TLS handshake finished and selected one of the node's transports.

The LinkServer of every TLS listener (qim/net/link_server.py; decision 0119): each
connection handler is tracked by the node (cancelled on stop, its peer sees the
connection drop); a failed handshake and one that selected no offered ALPN protocol
are counted in qim_tls_handshake_failures_total and logged at most once a second; new
connections take the server context of the moment (SIGHUP reloads). The accept queue is CLIENT_BACKLOG deep (the kernel caps it at
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
import socket
from typing import Optional

from qim.net.link_server import LinkHandler, LinkServer, ListenerNode
from qim.net.tls import TlsContexts
from qim.services.gateway.keepalive import tcp_keepalive

logger = logging.getLogger(__name__)
CLIENT_BACKLOG = 4096


class ClientListener(LinkServer):
    """The LinkServer of one ConnectionNode's client port: `node` (its connection
    tracking, stop flag and TLS refusal counter), `tls` (None: plaintext development),
    `serve(link)` the connection handler, `heartbeat_s` the gateway's heartbeat (TCP
    keepalive; 0: the kernel's defaults)."""

    backlog = CLIENT_BACKLOG

    def __init__(self, node: ListenerNode, tls: Optional[TlsContexts], serve: LinkHandler, chunk_bytes: int,
                 handshake_timeout: float, name: str = "client", heartbeat_s: int = 0) -> None:
        super().__init__(node, tls, serve, chunk_bytes, handshake_timeout, name)
        self.heartbeat_s = heartbeat_s

    async def start(self, addr: str) -> asyncio.AbstractServer:
        """Listen on 'host:port' (OSError when it cannot be bound) after raising the
        file-descriptor limit (logged); the node closes it on stop."""
        logger.info("client port %s: at most %d file descriptors (connections)", addr, raise_nofile_limit())
        return await super().start(addr)

    def configure(self, sock: socket.socket) -> None:
        """TCP_NOTSENT_LOWAT and TCP keepalive on the listening socket: accepted ones
        inherit them (no system call per login)."""
        super().configure(sock)
        if self.heartbeat_s:
            tcp_keepalive(sock, self.heartbeat_s)


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
