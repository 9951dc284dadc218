"""The gateway's routing table: client opcode -> (validator, backend, envelope, routing
rule), built from the service table (docs/design.md §4 "Gateway validation", §5.1;
qim/topology.py: each backend row's `gateway` column).

Each route's `check(conn, body)` parses the upstream bytes, rejects what needs no
storage to reject (INVALID_ARGUMENT, PAYLOAD_TOO_LARGE: qim/services/gateway/requests.py)
and returns the routing key of its backend; the router picks the node by the row's rule
(qim/services/gateway/router.py). The bytes are forwarded unchanged inside the row's
envelope with the actor from AUTH (`forward`). `bulk` routes answer with pages: the
connection fetches at most BULK_INFLIGHT of them at a time and only while its reply
backlog has room (qim/services/gateway/conn.py). PING and AUTH are answered by the
connection itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.topology import gateway_backends, load

RouteKey = Union[bytes, int]


@dataclass(frozen=True)
class Route:
    """One client opcode: `check(conn, body)` -> routing key (raises RequestError);
    `backend` the service name, `opcode` the internal opcode and `envelope` the
    internal_pb2 message class the request travels in."""

    backend: str
    opcode: int
    envelope: Any
    check: Callable[[Any, bytes], RouteKey]
    bulk: bool = False

    @property
    def carries_opcode(self) -> bool:
        """True when the envelope names the client opcode (a backend serving several)."""
        return "opcode" in self.envelope.DESCRIPTOR.fields_by_name


def build_routes() -> dict[int, Route]:
    """Every client route of every gateway backend row (ValueError: an opcode twice)."""
    routes: dict[int, Route] = {}
    for row in gateway_backends():
        backend = row.gateway
        assert backend is not None
        envelope = getattr(internal_pb2, backend.envelope)
        for opcode, spec in backend.routes.items():
            if opcode in routes:
                raise ValueError(f"client opcode 0x{opcode:04x} routed to {routes[opcode].backend} and {row.name}")
            routes[opcode] = Route(row.name, backend.opcode, envelope, load(spec.check), spec.bulk)
    return routes


ROUTES: dict[int, Route] = build_routes()
# Frozen but not served yet (chatrooms), and server-to-client opcodes of those
# categories sent upstream: "not supported yet" rather than "unknown".
RESERVED = frozenset(op.value for op in Opcode if (op >> 8) in (0x04, 0x05, 0x06, 0x0A)) - set(ROUTES)


def envelope(route: Route, actor: internal_pb2.Actor, opcode: int, upstream: bytes) -> bytes:
    """The internal request that carries `upstream` (unchanged) to the route's backend."""
    if route.carries_opcode:
        return route.envelope(actor=actor, upstream=upstream, opcode=opcode).SerializeToString()
    return route.envelope(actor=actor, upstream=upstream).SerializeToString()


async def forward(router: Any, route: Route, key: RouteKey, actor: internal_pb2.Actor, opcode: int,
                  upstream: bytes) -> tuple[int, bytes]:
    """Send one validated request to its backend through `router` (BackendRouter.call);
    the backend's reply. Raises RequestError (UNAVAILABLE, or the backend's own ERROR as
    RemoteError)."""
    return await router.call(route.backend, key, route.opcode, envelope(route, actor, opcode, upstream))
