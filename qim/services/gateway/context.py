"""What a client connection and its device session see of their gateway node, and what
the gateway half of a backend sees of a device session (issue 36; decision 0116).

ConnectionNode (server.py) is one GatewayContext; a unit test's stand-in
(tests/gateway/standin.py) is another, built from the same parts. The optional parts
are None where a node runs without them: no registry (no session epochs, no presence),
no Redis (no revocations), no login admission. Declaring them here, rather than
probing the node with getattr, makes a stand-in that lacks a part a type error, not a
silently skipped step.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Awaitable, Callable, Optional, Protocol, Union

if TYPE_CHECKING:
    from qim.config import GatewayConfig
    from qim.proto.v1 import internal_pb2
    from qim.services.gateway.auth import Authenticator
    from qim.services.gateway.metrics import GatewayMetrics
    from qim.services.gateway.online import OnlineRegistry
    from qim.services.gateway.presence import PresencePublisher
    from qim.services.gateway.ratelimit import SendLimiter
    from qim.services.gateway.revocation import Revocations
    from qim.services.gateway.router import BackendRouter
    from qim.stores.presence import SessionEpochStore

RouteKey = Union[bytes, int]  # a route's routing key (routes.py): a shard number or a conversation key


class Admission(Protocol):
    """The LoginAdmission of login.py (decision 0078), named here by what it does so that
    login.py, which uses this context, is not imported back by it."""

    def slot(self) -> AbstractAsyncContextManager[None]:
        """Wait for a login slot (LoginBusy when the queue is full); held while inside."""
        ...


class GatewayContext(Protocol):
    """The gateway parts a ClientConnection uses: `config`, the OnlineRegistry
    `online`, the BackendRouter `router`, `metrics`, the AUTH Authenticator `auth`, the
    SendLimiter `limiter` (QIM_RATE_*), `locals` (the LocalBackends by backend name:
    routes.py), and the optional `logins` (LoginAdmission: decision 0078),
    `revocations` (decision 0100), `epochs` (session_epoch per login: decision 0042)
    and `presence` (the PresencePublisher). Read-only here: a node sets them once.
    """

    @property
    def config(self) -> GatewayConfig:
        """GatewayConfig (QIM_* settings)."""
        ...

    @property
    def online(self) -> OnlineRegistry:
        """The OnlineRegistry: authenticated connections by user."""
        ...

    @property
    def router(self) -> BackendRouter:
        """The BackendRouter: forwards requests to the owning backend node."""
        ...

    @property
    def metrics(self) -> GatewayMetrics:
        """The gateway's qim_gateway_* metrics."""
        ...

    @property
    def auth(self) -> Authenticator:
        """Verifies AUTH tokens (auth.py)."""
        ...

    @property
    def limiter(self) -> SendLimiter:
        """The send token buckets (ratelimit.py)."""
        ...

    @property
    def locals(self) -> dict[str, LocalBackend]:
        """LocalBackends by backend name (routes.py): state per connection, rooms."""
        ...

    @property
    def logins(self) -> Optional[Admission]:
        """Login admission (decision 0078); None: every AUTH runs at once."""
        ...

    @property
    def revocations(self) -> Optional[Revocations]:
        """Token revocations (decision 0100); None: no Redis, none checked."""
        ...

    @property
    def epochs(self) -> Optional[SessionEpochStore]:
        """Session epochs (decision 0042); None: no registry, session_epoch 0."""
        ...

    @property
    def presence(self) -> Optional[PresencePublisher]:
        """The PresencePublisher; None: no registry, no presence."""
        ...


class ClientSession(Protocol):
    """What the gateway half of a backend sees of a device session (device_session.py
    DeviceSession): a route's `check(session, body)` reads the identity and `gw`; a
    LocalBackend (routes.py; rooms) also sends it frames, waits for its queue to drain
    and names it by `conn_id` (the `connection` of its envelope)."""

    tenant: int
    user_id: int
    device_id: int
    shard: int
    conn_id: int
    gw: GatewayContext

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes not yet handed to the device's socket."""
        ...

    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        """Queue one frame to the device (StreamClosed when closed)."""
        ...

    async def wait_writable(self, limit: int) -> None:
        """Wait until at most `limit` bytes are queued toward the device."""
        ...

    def actor(self) -> internal_pb2.Actor:
        """The authenticated identity its requests carry to the backends."""
        ...


class LocalBackend(Protocol):
    """The gateway-side half of a backend with state per client connection (routes.py).
    `request` raises RequestError like a route check or the backend; the others never raise."""

    async def request(self, conn: ClientSession, opcode: int, key: RouteKey, body: bytes,
                      call: Callable[[], Awaitable[tuple[int, bytes]]]) -> tuple[int, bytes]:
        """Serve one client request of this backend; `call()` forwards it."""
        ...

    def closed(self, conn: ClientSession) -> None:
        """Device session `conn` ended."""
        ...

    async def close(self) -> None:
        """The node stops: cancel its background work."""
        ...

    def on_push(self, addr: str, body: bytes) -> None:
        """A `pushes` frame from the backend node at `addr`."""
        ...

    def on_lost(self, addr: str) -> None:
        """The gateway's connection to the backend node at `addr` dropped (called before
        any new connection to it is made)."""
        ...
