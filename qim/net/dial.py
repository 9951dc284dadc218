"""Dialling a peer: a TCP connection to host:port, upgraded to TLS when a client
context is given (qim/net/tls.py `connect`: the server certificate verified, the socket
buffering of about one chunk the framed transport wants: docs/decisions/0011-slow-links.md).
The byte stream it returns is what qim/net/framed.py `open_framed` and the SDK's
transports wrap.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Optional

from qim.consts import STREAM_WRITE_CHUNK_BYTES
from qim.net.tls import connect as tls_connect


async def open_stream(host: str, port: int, timeout: float, tls: Optional[ssl.SSLContext] = None,
                      server_hostname: Optional[str] = None, chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to host:port within `timeout` s, upgraded to TLS with `tls`
    (qim/net/tls.py `connect`: the server certificate verified by the context against
    `server_hostname`, default `host`). Raises OSError (HandshakeFailed for a failed
    handshake) / asyncio.TimeoutError."""
    if tls is None:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    # the name checked against the certificate defaults to the host dialled
    return await tls_connect(host, port, tls, server_hostname=server_hostname or host, chunk_bytes=chunk_bytes,
                             timeout=timeout)
