"""The WebSocket upgrade, server and client side, over an asyncio stream that is already
TCP or TLS (docs/protocol.md "WebSocket"; docs/operations.md "WebSocket").

The `websockets` library's Sans-I/O protocol does the HTTP/1.1 upgrade (RFC 6455); this
file feeds it bytes and applies QIM's rules:
- one path, WS_PATH (404 otherwise);
- the Origin header checked against an allow-list (`origin_patterns`: exact origins,
  or `scheme://host:*` for any port); a request without Origin is not a browser's and
  is accepted (a browser always sends one; a non-browser client could send any);
  403 for an origin off the list;
- no extension is negotiated (permessage-deflate off: bodies are zstd already), no
  subprotocol;
- max_size is one chunk (qim/net/websocket.py MESSAGE_MAX_BYTES);
- the request is read within `timeout` and at most REQUEST_MAX_BYTES.
A refused upgrade gets its HTTP status and a one-line reason, then the connection
closes: `UpgradeRefused.reason` is the bounded label counted by the gateway
(qim_gateway_ws_refused_total{reason}: path, origin, request, timeout).
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
from typing import Any, Optional, Sequence, Union, cast

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidOrigin
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from qim.consts import WS_ORIGIN_PATTERN, WS_PATH
from qim.net.transport import ByteReader, ByteWriter, release
from qim.net.websocket import MESSAGE_MAX_BYTES

REQUEST_MAX_BYTES = 16 * 1024  # an upgrade request is a few hundred bytes
# The library logs every opened connection at INFO; the gateway counts them instead
# (qim_gateway_ws_connections_total) and logs refusals itself.
PROTOCOL_LOG = logging.getLogger("qim.net.ws_protocol")
PROTOCOL_LOG.setLevel(logging.WARNING)
Origin = Union[str, "re.Pattern[str]", None]


class UpgradeRefused(ConnectionError):
    """The server refused a WebSocket upgrade; `reason` labels it (module doc), `status`
    is the HTTP status sent (0 when none could be)."""

    def __init__(self, reason: str, status: int, detail: str) -> None:
        super().__init__(f"WebSocket upgrade refused ({status}): {detail}")
        self.reason = reason
        self.status = status


def origin_patterns(entries: Sequence[str]) -> list[Origin]:
    """The allow-list the server protocol checks: each entry an exact origin
    ('https://chat.example.com') or 'scheme://host:*' (any port), plus None (no Origin
    header: not a browser). ValueError for an entry that is not scheme://host[:port|:*]."""
    patterns: list[Origin] = [None]
    for entry in entries:
        if not re.fullmatch(WS_ORIGIN_PATTERN, entry):
            raise ValueError(f"{entry!r} is not an origin (scheme://host[:port], port may be *)")
        if entry.endswith(":*"):
            patterns.append(re.compile(re.escape(entry[:-2]) + r"(:\d+)?"))
        else:
            patterns.append(entry)
    return patterns


async def _read_into(reader: ByteReader, proto: Union[ServerProtocol, ClientProtocol], writer: ByteWriter) -> list:
    """Feed bytes until the protocol parsed the handshake message; its events (the
    request or response first, then any frames right behind it)."""
    received = 0
    while True:
        data = await reader.read(4096)
        if not data:
            proto.receive_eof()
            return proto.events_received()
        received += len(data)
        proto.receive_data(data)
        events = proto.events_received()
        for chunk in proto.data_to_send():  # a 4xx of the library's own (a header too long)
            if chunk:
                writer.write(chunk)
        if events or proto.handshake_exc is not None:
            return events
        if received > REQUEST_MAX_BYTES:
            return []


async def accept_upgrade(reader: ByteReader, writer: ByteWriter, origins: Sequence[Origin],
                         timeout: float) -> tuple[ServerProtocol, list]:
    """Answer the upgrade request on a just-accepted connection: the open protocol and the
    events parsed behind the request. UpgradeRefused (the response sent, the connection
    closed) for anything the module doc refuses."""
    proto = ServerProtocol(origins=cast(Any, list(origins)), extensions=None, subprotocols=None, max_size=MESSAGE_MAX_BYTES,
                           logger=PROTOCOL_LOG)
    try:
        async with asyncio.timeout(timeout):
            events = await _read_into(reader, proto, writer)
    except TimeoutError:
        writer.close()
        raise UpgradeRefused("timeout", 0, f"no upgrade request within {timeout:.0f} s") from None
    request = events[0] if events and isinstance(events[0], Request) else None
    if request is None:
        response = proto.reject(http.HTTPStatus.BAD_REQUEST, "not a WebSocket upgrade request\n")
        reason = "request"
    elif request.path.split("?", 1)[0] != WS_PATH:
        response = proto.reject(http.HTTPStatus.NOT_FOUND, f"the QIM WebSocket path is {WS_PATH}\n")
        reason = "path"
    else:
        response = proto.accept(request)
        reason = "origin" if isinstance(proto.handshake_exc, InvalidOrigin) else "request"
    if proto.handshake_exc is not None:  # kept by the protocol; its traceback holds the request (a cycle)
        release(proto.handshake_exc)
    proto.send_response(response)
    for chunk in proto.data_to_send():
        if chunk:
            writer.write(chunk)
    if response.status_code != http.HTTPStatus.SWITCHING_PROTOCOLS:
        try:
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        writer.close()
        raise UpgradeRefused(reason, response.status_code, response.body.decode(errors="replace").strip())
    return proto, events[1:]


async def connect_upgrade(reader: ByteReader, writer: ByteWriter, uri: str,
                          origin: Optional[str], timeout: float) -> tuple[ClientProtocol, list]:
    """Send the upgrade request for `uri` (ws:// or wss://) and read the answer: the open
    protocol and the events parsed behind the response. UpgradeRefused when the server
    answered anything but 101 (its status and body), ConnectionError when it closed,
    TimeoutError after `timeout`."""
    proto = ClientProtocol(parse_uri(uri), origin=origin, extensions=None, subprotocols=None,  # type: ignore[arg-type]
                           max_size=MESSAGE_MAX_BYTES, logger=PROTOCOL_LOG)
    request = proto.connect()
    proto.send_request(request)
    for chunk in proto.data_to_send():
        writer.write(chunk)
    async with asyncio.timeout(timeout):
        events = await _read_into(reader, proto, writer)
    response = events[0] if events and isinstance(events[0], Response) else None
    if response is None:
        raise ConnectionError(f"{uri}: no WebSocket upgrade response")
    if response.status_code != http.HTTPStatus.SWITCHING_PROTOCOLS or proto.handshake_exc is not None:
        body = (response.body or b"").decode(errors="replace").strip()
        raise UpgradeRefused("refused", response.status_code, body or str(proto.handshake_exc))
    return proto, events[1:]
