"""The raw login of the frame-level load generators (`qim-loadgen rate`, `room`, and the
replay's reachability check): one authenticated FramedStream per user, and one typed
error, LoginFailed, whose text is the whole one-line message a CLI prints (the project's
rule: bad input or an unreachable peer gives one line and a non-zero exit, never a
traceback; the wording follows qim/desktop/cli.py's connect_error).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Optional

from qim.errors import TlsError
from qim.net.framed import FramedStream, StreamClosed, open_framed, parse_addr
from qim.net.tls import ALPN
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey

AUTH_TIMEOUT_S = 10.0


class LoginFailed(RuntimeError):
    """A login that did not reach AUTH_OK: the gateway cannot be reached, refused TLS or
    ALPN, or refused the token. str() is the one line to print."""


async def login(addr: str, key: SigningKey, user: int, tls: Optional[ssl.SSLContext] = None) -> FramedStream:
    """A raw authenticated stream of `user` (tenant 0, device 1) at `addr` ("host:port")
    over TLS with `tls` (None: plaintext). LoginFailed when the address cannot be reached
    (connection refused, timeout, TLS handshake), ALPN qim/1 or AUTH is refused."""
    host, port = parse_addr(addr)
    try:
        stream = await open_framed(host, port, tls=tls, server_hostname=host)
    except ssl.SSLError as exc:
        raise LoginFailed(f"cannot reach {addr}: TLS handshake failed: {exc.__class__.__name__} "
                          "(check --ca-file or $QIM_CA_FILE, or --plaintext for a plaintext gateway)") from None
    except (OSError, asyncio.TimeoutError, TlsError) as exc:
        raise LoginFailed(f"cannot reach {addr}: {exc.__class__.__name__} (is qim-gateway listening there?)") from None
    if tls is not None and stream.alpn != ALPN:
        stream.abort()
        raise LoginFailed(f"{addr} did not agree to ALPN {ALPN} (is it qim-gateway's client port?)")
    try:
        stream.send(Opcode.AUTH, 1, connection_pb2.Auth(token=issue_dev_token(key, 0, user, 1)).SerializeToString())
        item = await asyncio.wait_for(stream.read_frame(), AUTH_TIMEOUT_S)
    except (OSError, StreamClosed, asyncio.TimeoutError) as exc:
        stream.abort()
        raise LoginFailed(f"{addr} did not answer AUTH for user {user}: {exc.__class__.__name__} "
                          "(a TLS gateway given --plaintext?)") from None
    if item is None or item[0] != Opcode.AUTH_OK:
        stream.abort()
        said = "closed the connection" if item is None else f"answered opcode {item[0]:#x}"
        raise LoginFailed(f"AUTH failed for user {user} at {addr}: the gateway {said} "
                          "(check --token-key or $QIM_DEV_TOKEN_KEY)")
    return stream
