"""The gateways one runtime may use, and moving to the next when one fails (docs/sdk.md
"Several gateways"; docs/decisions/0082).

An app gives one endpoint or several ("host:port", ws:// or wss:// forms; a list, or
one string "a,b"), in order of preference. A connection attempt tries the current
gateway; when it cannot be reached, does not answer AUTH within CONNECT_TIMEOUT_S,
fails TLS or answers UNAVAILABLE, the same attempt goes on to the next gateway, each
once. A connection that was up and is lost (the heartbeat found no byte for a probe
window: a frozen or cut gateway) also makes the next gateway the current one, so the
reconnect (after the supervisor's jittered backoff, qim/sdk/reconnect.py) goes
elsewhere first. A refused token is not the gateway's fault: no move.

The local store is kept per deployment and user, never per gateway
(qim/sdk/identity.py store_path: the `deployment` name, else the first endpoint).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Optional, Sequence, Union

from qim.errors import ErrorCode, TlsError
from qim.sdk.connection import CONNECT_TIMEOUT_S, Connection
from qim.sdk.events import ConnectionLost, ServerError
from qim.sdk.model import canonical_endpoint
from qim.sdk.transports import endpoint_tls

logger = logging.getLogger(__name__)

Endpoints = Union[str, Sequence[str]]


def parse_endpoints(endpoint: Endpoints) -> tuple[str, ...]:
    """The endpoints of `endpoint` (a string, possibly comma-separated, or a sequence),
    in order. ValueError for none, a malformed one or one listed twice."""
    items = endpoint.split(",") if isinstance(endpoint, str) else list(endpoint)
    out = tuple(e.strip() for e in items if e and e.strip())
    if not out:
        raise ValueError("no gateway endpoint given")
    seen = set()
    for e in out:
        key = canonical_endpoint(e)  # ValueError names a malformed one
        if key in seen:
            raise ValueError(f"gateway endpoint {e!r} is listed twice")
        seen.add(key)
    return out


class Gateways:
    """The endpoints of one runtime with their TLS contexts (built once, reading the CA
    file now; qim/sdk/connection.py client_tls) and which one is current."""

    def __init__(self, endpoint: Endpoints, ca_file: Optional[str], ssl_context: Optional[ssl.SSLContext],
                 plaintext: bool) -> None:
        self.endpoints = parse_endpoints(endpoint)
        self._tls = {e: endpoint_tls(e, ca_file, ssl_context, plaintext) for e in self.endpoints}
        self._at = 0
        self.moves = 0  # how many times the runtime moved to another gateway
        self.connect_timeout_s = CONNECT_TIMEOUT_S  # per gateway: TCP, TLS and AUTH

    @property
    def current(self) -> str:
        """The endpoint the next attempt tries first."""
        return self.endpoints[self._at]

    def tls(self, endpoint: str) -> Optional[ssl.SSLContext]:
        """The TLS context of `endpoint` (None: plaintext, development only)."""
        return self._tls[endpoint]

    def failed(self, endpoint: str) -> None:
        """`endpoint` failed an attempt or lost its connection: the next gateway becomes
        current (no change when another one already is, or there is only one)."""
        if len(self.endpoints) > 1 and self.endpoints[self._at] == endpoint:
            self._at = (self._at + 1) % len(self.endpoints)
            self.moves += 1
            logger.info("gateway %s failed; next: %s", endpoint, self.current)

    async def dial(self, token: str) -> tuple[Connection, str]:
        """Connect and AUTH to the current gateway, else to each next one once (module
        docstring); returns the connection and its endpoint. Raises what the last
        gateway tried raised; a ServerError other than UNAVAILABLE (a refused token,
        RATE_LIMITED with its hint) at once."""
        last: Optional[BaseException] = None
        for _ in self.endpoints:
            endpoint = self.current
            try:
                return await Connection.open(endpoint, token, self.connect_timeout_s, self._tls[endpoint]), endpoint
            except ServerError as exc:
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                last = exc
            except (ConnectionLost, TlsError, OSError, asyncio.TimeoutError) as exc:
                last = exc
            self.failed(endpoint)
        assert last is not None
        raise last
