"""The services of QIM, one row each: the single definition every per-service list is
derived from (docs/architecture.md "Services"; docs/decisions/0028-topology-table.md).

A row says what a service IS, never how it works: its name (also its certificate
identity `qim://service/<name>`, its process `qim-<name>` and its metric label), the
prefix of its variables (`QIM_<ENV>_*`), its listeners and metrics port, its entry
(dotted paths, so this module imports no service), the internal opcodes it serves and
which services may call each, when the gateway forwards client requests to it the
envelope and the routing rule (its client calls are declared in qim/wire/calls.py),
whether it reads the shared engine variables, and its place in a rolling restart.
Derived from it (and checked by tests/test_topology.py):

- the internal RPC allow-list and metric labels (qim/net/allow.py);
- the development certificates (qim/dev/certs.py) and the dev stack layout: instances,
  port keys, environment (qim/dev/stack_layout.py);
- default listen and metrics addresses, and the peers each config dials (qim/config/);
- one entry point for every process (`qim.app.main`, pyproject.toml `[project.scripts]`);
- the gateway's client routes, envelopes and backend routing (qim/services/gateway/routes.py,
  router.py), with the client calls declared per kind (qim/wire/calls.py);
- the services reading the shared engine variables (qim/config/variables.py) and the
  order of a rolling restart (qim/dev/rolling.py);
- the HTTP routes each node serves beside /metrics and /healthz (qim/obs/http.py).

Synapse's `config/workers.py` (instance maps, stream writers) is the model. A new
service is one row here, a declaration per client call (qim/wire/calls.py) and its own
packages (the RoomWriter, `qim-room`, was added so).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional

from qim.protocol import Opcode

GATEWAY, WRITER, MAILBOX, SESSION, ROOM, FANOUT, ARCHIVER, MODERATION, NOTIFY, QIMCTL = (
    "gateway", "writer", "mailbox", "session", "room", "fanout", "archiver", "moderation", "notify", "qimctl")
MEDIA = "media"
# Routing rules of the gateway's backends (qim/services/gateway/router.py).
RENDEZVOUS = "rendezvous"  # key: bytes; highest BLAKE3(addr ‖ key) first, the next when one is unreachable
MODULO = "modulo"  # key: int; node key mod n (static assignment)
# key: int, the user's shard; its live owner in the ShardRegistry (docs/decisions/0040-scale-leases-and-fencing.md)
SHARD_OWNER = "shard-owner"
ROUTINGS = (RENDEZVOUS, MODULO, SHARD_OWNER)
# What a kind's nodes lease from the ShardRegistry (Service.leases)
SHARDS = "shards"  # the users' shards: virtual bucket mod QIM_MAILBOX_SHARD_COUNT
OUTBOX = "outbox"  # the Outbox partitions
NODE = "node"  # a node lease only (liveness)


@dataclass(frozen=True)
class Listener:
    """One address a process listens on: its variable, default port on 127.0.0.1, and the
    suffix of its key in the dev stack's port book ("" = the instance name itself)."""

    var: str
    port: int
    suffix: str = ""


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP route a service serves on its metrics listener beside /metrics and
    /healthz (qim/obs/http.py; docs/decisions/0111-an-http-seam-on-aiohttp.md): `method`
    and `path` (an aiohttp template: `{name}` parts reach the handler as
    request.match_info), `handler` the name of the node's coroutine method, awaited as
    `handler(request, device)`; `token`: an `Authorization: Bearer <device token>` is
    required and verified (`device` the VerifiedToken, else None); `max_body` bytes of
    request body (413 above), `timeout_s` for the whole request (408 after)."""

    method: str
    path: str
    handler: str
    token: bool = True
    max_body: int = 64 * 1024
    timeout_s: float = 30.0


@dataclass(frozen=True)
class GatewayBackend:
    """How the gateway reaches a service for client requests: the internal `opcode` it
    sends, the internal_pb2 `envelope` message (fields actor, upstream, and opcode when
    the message has one) and the `routing` rule over the service's addresses; the client
    opcodes routed there are the calls declared for the service (qim/wire/calls.py);
    `local` and `pushes` for a backend with state per client connection (below)."""

    opcode: int
    envelope: str
    routing: str
    # A backend that keeps state per client connection (the RoomWriter: rooms joined,
    # live events): `local` ("module:Class") is the gateway-side half, built once per
    # gateway as Class(gateway node) (qim/services/gateway/routes.py LocalBackend): it
    # wraps every client request of this backend, hears of every client connection that
    # closes, and takes the `pushes` frames (an internal opcode the gateway serves) the
    # backend sends back, request_id 0, on the gateway's own connection to it, and the
    # loss of that connection (docs/decisions/0045-rooms-phase-one-in-process-ring.md).
    local: Optional[str] = None
    pushes: Optional[int] = None


@dataclass(frozen=True)
class Service:
    """One row (module doc). `listeners`: the first is the internal one peers dial (the
    gateway's push listener, a writer's RPC port) unless `internal` names another var;
    `peers_var`: the variable listing every node of this kind for the services that dial
    it (default QIM_<ENV>_ADDRS); `serves`: internal opcode -> the services allowed to
    call it (a missing opcode is refused to everyone); `entry`/`config`: the node class
    and its configuration dataclass ("module:Name"; None: not a process, e.g. qimctl);
    `node_index`: each node of the kind gets QIM_<ENV>_NODE_INDEX and the kind
    QIM_<ENV>_NODE_COUNT (static shard or user assignment); `archive_only`: runs only
    with the archive tier (QIM_SCYLLA_ADDRS); `leases`: what its nodes lease from the
    ShardRegistry (SHARDS: the users' shards, OUTBOX: Outbox partitions, NODE: a node
    lease only, its liveness; "" none: docs/decisions/0040-scale-leases-and-fencing.md);
    `engines`: it reads the shared engine variables (Redis layout, Kafka, shard count,
    tier: qim/config/common.py); `roll`: its place in a rolling restart, readers of a
    record or frame before its writers (qim/dev/rolling.py; None: not a process);
    `http`: the HTTP routes it serves (HttpRoute; the media service's uploads); `dev_nodes`:
    how many nodes the dev stack starts when not told (0: a kind that needs the operator's
    own endpoint, the ModerationService)."""

    name: str
    entity: str  # the design's entity name (docs/design.md §2)
    env: str
    metrics_port: Optional[int] = None
    entry: Optional[str] = None
    config: Optional[str] = None
    listeners: tuple[Listener, ...] = ()
    internal: Optional[str] = None
    peers_var: Optional[str] = None
    serves: Mapping[int, frozenset[str]] = field(default_factory=dict)
    gateway: Optional[GatewayBackend] = None
    node_index: bool = False
    archive_only: bool = False
    leases: str = ""
    engines: bool = False
    roll: Optional[int] = None
    http: tuple[HttpRoute, ...] = ()  # HTTP routes on its metrics listener (HttpRoute)
    dev_nodes: int = 1  # nodes the dev stack starts unless asked (0: only on request)

    @property
    def process(self) -> bool:
        """True for a service that runs as its own process `qim-<name>`."""
        return self.entry is not None

    @property
    def internal_listener(self) -> Optional[Listener]:
        """The listener other services dial (None: nobody dials this service)."""
        if not self.serves:
            return None
        return next(ln for ln in self.listeners if self.internal in (None, ln.var))

    @property
    def addrs_var(self) -> str:
        """The variable that lists the addresses of every node of this kind."""
        return self.peers_var or f"QIM_{self.env}_ADDRS"

    @property
    def metrics_var(self) -> str:
        """QIM_<ENV>_METRICS_LISTEN."""
        return f"QIM_{self.env}_METRICS_LISTEN"


def _callers(*names: str) -> frozenset[str]:
    return frozenset(names)


SERVICES: Mapping[str, Service] = MappingProxyType({s.name: s for s in (
    Service(WRITER, "ConversationWriter", "WRITER", 9101,
            "qim.services.writer.server:ConversationWriter", "qim.config.writer:WriterConfig",
            listeners=(Listener("QIM_WRITER_LISTEN", 7101),),
            serves={Opcode.WRITER_SEND: _callers(GATEWAY, QIMCTL),  # qimctl group create acts for the owner
                    Opcode.WRITER_ADMIN: _callers(QIMCTL)},  # membership edits, operator deletes: never a gateway
            # local: REACT/TYPING events fanned out by the gateway (decision 0121)
            gateway=GatewayBackend(Opcode.WRITER_SEND, "WriterSend", RENDEZVOUS,
                                   local="qim.services.gateway.backends.ephemeral:EphemeralFanout"),
            engines=True, roll=9),
    Service(MAILBOX, "MailboxNode", "MAILBOX", 9102,
            "qim.services.mailbox.node:MailboxNode", "qim.config.mailbox:MailboxConfig",
            listeners=(Listener("QIM_MAILBOX_LISTEN", 7102),),
            serves={Opcode.MAILBOX_PULL: _callers(GATEWAY)},
            gateway=GatewayBackend(Opcode.MAILBOX_PULL, "MailboxPull", SHARD_OWNER),  # key: the user's shard
            engines=True, roll=5, leases=SHARDS),
    Service(SESSION, "SessionProjection", "SESSION", 9103,
            "qim.services.session.node:SessionNode", "qim.config.session:SessionConfig",
            listeners=(Listener("QIM_SESSION_LISTEN", 7103),),
            serves={Opcode.SESSION_CALL: _callers(GATEWAY), Opcode.PROJECTION: _callers(MAILBOX)},
            gateway=GatewayBackend(Opcode.SESSION_CALL, "SessionCall", SHARD_OWNER),  # key: the user's shard
            engines=True, roll=4, leases=SHARDS),
    Service(ROOM, "RoomWriter", "ROOM", 9108,
            "qim.services.room.node:RoomNode", "qim.config.room:RoomConfig",
            listeners=(Listener("QIM_ROOM_LISTEN", 7106),),
            serves={Opcode.ROOM_CALL: _callers(GATEWAY)},
            gateway=GatewayBackend(Opcode.ROOM_CALL, "RoomCall", MODULO,  # key: the room shard
                                   local="qim.services.gateway.backends.room:RoomFanout", pushes=Opcode.ROOM_PUSH),
            node_index=True, roll=7),
    Service(GATEWAY, "ConnectionNode", "GATEWAY", 9100,
            "qim.services.gateway.server:ConnectionNode", "qim.config.gateway:GatewayConfig",
            listeners=(Listener("QIM_GATEWAY_LISTEN", 7100), Listener("QIM_GATEWAY_PUSH_ADDR", 7104, "_push"),
                       Listener("QIM_GATEWAY_WS_LISTEN", 7105, "_ws")),  # plain ws://: development only
            internal="QIM_GATEWAY_PUSH_ADDR", peers_var="QIM_GATEWAY_PUSH_ADDR",
            serves={Opcode.PUSH_BATCH: _callers(MAILBOX), Opcode.DEVICE_FRAMES: _callers(SESSION),
                    Opcode.ROOM_PUSH: _callers(ROOM),  # ROOM_PUSH on the gateway's own ROOM_CALL connection
                    Opcode.EPHEMERAL_FRAMES: _callers(GATEWAY)},  # reactions, typing (decision 0121)
            leases=NODE, engines=True, roll=0),
    Service(FANOUT, "FanoutCoordinator", "FANOUT", 9106,
            "qim.services.fanout.node:FanoutNode", "qim.config.fanout:FanoutConfig", leases=OUTBOX,
            engines=True, roll=6),
    Service(ARCHIVER, "HistoryArchiver", "ARCHIVER", 9107,
            "qim.services.archiver.node:ArchiverNode", "qim.config.archiver:ArchiverConfig", archive_only=True,
            leases=OUTBOX, engines=True, roll=3),
    # after-send notifications from the Outbox, a Kafka consumer group (decision 0123); the dev
    # stack starts it only when asked (it needs the operator's receiver: dev_nodes=0)
    Service(MODERATION, "ModerationService", "MODERATION", 9109,
            "qim.services.moderation.node:ModerationNode", "qim.config.moderation_service:ModerationConfig",
            engines=True, roll=2, dev_nodes=0),
    # offline push from the dispatch log, a Kafka consumer group (decision 0135); the dev stack
    # starts it only when asked (it needs the operator's provider credentials: dev_nodes=0)
    Service(NOTIFY, "NotificationService", "NOTIFY", 9110,
            "qim.services.notify.node:NotifyNode", "qim.config.notify:NotifyConfig",
            engines=True, roll=1, dev_nodes=0),
    # photos and files in object storage over HTTP (issue 40; decisions 0137, 0138); rolled just
    # before the writers (the Outbox writer stays last); the dev stack starts one when its engines
    # have an object store (qim/dev/engines_s3.py, qim/dev/stack.py), none otherwise (dev_nodes=0)
    Service(MEDIA, "MediaService", "MEDIA", 9111,
            "qim.services.media.node:MediaNode", "qim.config.media:MediaConfig",
            http=(HttpRoute("POST", "/v1/media", "upload", max_body=64 * 1024 * 1024, timeout_s=120.0),
                  HttpRoute("GET", "/v1/media/{media_id}", "download", timeout_s=120.0),
                  # large files: presigned multipart parts, resumable (qim/services/media/multipart.py)
                  HttpRoute("POST", "/v1/media/uploads", "start_upload", max_body=4096),
                  HttpRoute("GET", "/v1/media/uploads/{upload}", "upload_status"),
                  HttpRoute("POST", "/v1/media/uploads/{upload}/complete", "complete_upload", max_body=4096,
                            timeout_s=600.0)),
            engines=True, roll=8, dev_nodes=0),
    Service(QIMCTL, "operator CLI", "QIMCTL"),  # an identity on internal RPC, not a process
)})


def service(name: str) -> Service:
    """The row of `name`; KeyError naming the known services otherwise."""
    try:
        return SERVICES[name]
    except KeyError:
        raise KeyError(f"no service {name!r}; known: {', '.join(SERVICES)}") from None


def processes() -> list[Service]:
    """The rows that run as processes, in start order."""
    return [s for s in SERVICES.values() if s.process]


def leasing() -> list[Service]:
    """The rows whose nodes hold leases in the ShardRegistry."""
    return [s for s in SERVICES.values() if s.leases]


def engine_readers() -> tuple[str, ...]:
    """The services that read the shared engine variables (the `engines` column)."""
    return tuple(s.name for s in SERVICES.values() if s.engines)


def roll_order() -> tuple[str, ...]:
    """The process kinds in rolling-restart order (the `roll` column: readers first)."""
    return tuple(s.name for s in sorted((s for s in SERVICES.values() if s.roll is not None), key=lambda s: s.roll or 0))


def rpc_allow() -> dict[int, frozenset[str]]:
    """Internal opcode -> the services that may send it, over every row."""
    return {op: callers for s in SERVICES.values() for op, callers in s.serves.items()}


def server_of(opcode: int) -> Service:
    """The row that serves internal `opcode` (KeyError when none does)."""
    for s in SERVICES.values():
        if opcode in s.serves:
            return s
    raise KeyError(f"no service serves opcode 0x{opcode:04x}")


def dials(name: str) -> list[Service]:
    """The services `name` calls: those serving an opcode it may send (table order), but
    for the `pushes` of its own gateway column: those travel back on the connections the
    gateway opened to it, nobody is dialled for them."""
    row = SERVICES.get(name)
    back = row.gateway.pushes if row is not None and row.gateway is not None else None
    return [s for s in SERVICES.values()
            if any(name in callers for op, callers in s.serves.items() if op != back)]


def speaks_rpc(name: str) -> bool:
    """True when `name` serves or calls internal RPC (it needs a service certificate)."""
    return bool(service(name).serves) or bool(dials(name))


def gateway_backends() -> list[Service]:
    """The rows the gateway forwards client requests to."""
    return [s for s in SERVICES.values() if s.gateway is not None]


def load(path: str) -> Any:
    """The object a "module:name" path of this table names, imported now (entries,
    configs, route checks); ImportError/ModuleNotFoundError or AttributeError otherwise."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
