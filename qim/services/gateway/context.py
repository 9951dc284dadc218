"""What a client connection and its device session see of their gateway node (issue 36).

ConnectionNode (server.py) is one GatewayContext; a unit test's stand-in
(tests/gateway/standin.py) is another, built from the same parts. The optional parts
are None where a node runs without them: no registry (no session epochs, no presence),
no Redis (no revocations), no login admission. Declaring them here, rather than
probing the node with getattr, makes a stand-in that lacks a part a type error, not a
silently skipped step.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from qim.config import GatewayConfig
    from qim.services.gateway.auth import Authenticator
    from qim.services.gateway.metrics import GatewayMetrics
    from qim.services.gateway.online import OnlineRegistry
    from qim.services.gateway.presence import PresencePublisher
    from qim.services.gateway.ratelimit import SendLimiter
    from qim.services.gateway.revocation import Revocations
    from qim.services.gateway.router import BackendRouter
    from qim.services.gateway.routes import LocalBackend
    from qim.stores.presence import SessionEpochStore


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
