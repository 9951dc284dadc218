"""The gateway's routing table: client opcode -> (validator, backend, envelope, routing
rule), built from the declared client calls (qim/wire/calls.py) and the service
table (docs/design.md §4 "Gateway validation", §5.1; qim/topology.py: each backend
row's `gateway` column).

Each route's `check(conn, body)` parses the upstream bytes, rejects what needs no
storage to reject (INVALID_ARGUMENT, PAYLOAD_TOO_LARGE: the backend's gateway half,
qim/services/gateway/backends/<kind>.py)
and returns the routing key of its backend; the router picks the node by the row's rule
(qim/services/gateway/router.py). The bytes are forwarded unchanged inside the row's
envelope with the actor from AUTH (`forward`). `bulk` routes answer with pages: the
connection fetches at most BULK_INFLIGHT of them at a time and only while its reply
backlog has room (qim/services/gateway/conn.py). PING and AUTH are answered by the
connection itself.

A backend row with a `local` class (qim/topology.py GatewayBackend) has a LocalBackend
in the gateway (`build_locals`): every request of that backend passes through its
`request()` (which calls the forward itself), it hears `closed(conn)` of every device
session (device_session.py), and `on_push`/`on_lost` of the gateway's own connections to the backend's
nodes (qim/services/gateway/router.py). The envelope carries `connection` (the client
connection's id within this gateway) when the message has that field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from google.protobuf.message import Message

from qim.obs import otel
from qim.obs.otel_gateway import traced_call
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.gateway.context import LocalBackend, RouteKey
from qim.topology import gateway_backends, load, service
from qim.wire.calls import CALLS, Call

if TYPE_CHECKING:
    from qim.services.gateway.context import ClientSession, GatewayContext
    from qim.services.gateway.router import BackendRouter



@dataclass(frozen=True)
class Route:
    """One client opcode: `check(conn, body)` -> routing key (raises RequestError);
    `backend` the service name, `opcode` the internal opcode and `envelope` the
    internal_pb2 message class the request travels in."""

    backend: str
    opcode: int
    envelope: type[Message]
    check: Callable[[ClientSession, bytes], RouteKey]
    bulk: bool = False

    @property
    def carries_opcode(self) -> bool:
        """True when the envelope names the client opcode (a backend serving several)."""
        return "opcode" in self.envelope.DESCRIPTOR.fields_by_name

    @property
    def carries_connection(self) -> bool:
        """True when the envelope names the client connection (a LocalBackend's backend)."""
        return "connection" in self.envelope.DESCRIPTOR.fields_by_name


def build_routes(calls: tuple[Call, ...] = CALLS) -> dict[int, Route]:
    """A route per declared client call (qim/wire/calls.py), through its backend's
    row (ValueError: an opcode declared twice, or a backend without a gateway column)."""
    routes: dict[int, Route] = {}
    for call in calls:
        if call.opcode in routes:
            raise ValueError(f"client opcode 0x{call.opcode:04x} routed to {routes[call.opcode].backend} "
                             f"and {call.backend}")
        backend = service(call.backend).gateway
        if backend is None:
            raise ValueError(f"{call.backend} serves {call.opcode.name} but its row has no gateway column")
        routes[call.opcode] = Route(call.backend, backend.opcode, getattr(internal_pb2, backend.envelope),
                                    load(call.check), call.bulk)
    return routes


ROUTES: dict[int, Route] = build_routes()
# Server-to-client opcodes of those categories sent upstream (and any frozen number
# not served yet): "not supported yet" rather than "unknown".
RESERVED = frozenset(op.value for op in Opcode if (op >> 8) in (0x04, 0x05, 0x06, 0x0A, 0x0B)) - set(ROUTES)


def envelope(route: Route, actor: internal_pb2.Actor, opcode: int, upstream: bytes, connection: int = 0) -> bytes:
    """The internal request that carries `upstream` (unchanged) to the route's backend."""
    fields: dict[str, Any] = {"actor": actor, "upstream": upstream}  # fields of several types
    if route.carries_opcode:
        fields["opcode"] = opcode
    if route.carries_connection:
        fields["connection"] = connection
    return route.envelope(**fields).SerializeToString()


async def forward(router: BackendRouter, route: Route, key: RouteKey, actor: internal_pb2.Actor, opcode: int,
                  upstream: bytes, connection: int = 0) -> tuple[int, bytes]:
    """Send one validated request to its backend through `router` (BackendRouter.call);
    the backend's reply. Raises RequestError (UNAVAILABLE, or the backend's own ERROR as
    RemoteError)."""
    if otel.ON:  # its spans only when tracing is on (docs/decisions/0140)
        return await traced_call(router.call, route.backend, key, route.opcode, opcode, actor,
                                 envelope(route, actor, opcode, upstream, connection))
    return await router.call(route.backend, key, route.opcode, envelope(route, actor, opcode, upstream, connection))


def build_locals(gateway: GatewayContext) -> dict[str, LocalBackend]:
    """The LocalBackend of every backend row that names one, by service name."""
    return {row.name: load(row.gateway.local)(gateway) for row in gateway_backends()
            if row.gateway is not None and row.gateway.local}
