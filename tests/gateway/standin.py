"""A stand-in ConnectionNode for unit tests of the gateway's client connections: a real
GatewayConfig, OnlineRegistry, Authenticator and SendLimiter around a router the test
supplies, and tokens signed with a test key the stand-in trusts (no engines)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

from qim.config import GatewayConfig
from qim.consts import TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT
from qim.net.framed import FramedStream
from qim.services.gateway.auth import Authenticator
from qim.services.gateway.conn import ClientConnection
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.services.gateway.ratelimit import SendLimiter
from qim.wire.tokens import SigningKey, issue_token

KEY = SigningKey.generate()  # what the stand-in trusts


def config(**overrides: Any) -> GatewayConfig:
    """A GatewayConfig trusting KEY; `overrides` replace any field (tenant 0, 8 shards)."""
    fields: dict[str, Any] = dict(
        common=SimpleNamespace(tenant=0, shard_count=8, redis_addr=""), listen="127.0.0.1:0", metrics_listen="127.0.0.1:0",
        push_listen="127.0.0.1:0", peers={"writer": ("127.0.0.1:1",), "mailbox": ("127.0.0.1:1",),
                                          "session": ("127.0.0.1:1",)}, token_keys=(KEY.verify_key(),), inflight_limit=8, max_body=1 << 20,
        auth_timeout_s=10.0)
    fields.update(overrides)
    return GatewayConfig(**fields)


@dataclass
class StandinGateway:
    """A GatewayContext (qim/services/gateway/context.py) without engines: no login
    admission, revocations, session epochs (session_epoch 0), presence or LocalBackends."""

    config: GatewayConfig
    online: OnlineRegistry
    router: Any
    metrics: GatewayMetrics
    auth: Authenticator
    limiter: SendLimiter
    locals: dict = field(default_factory=dict)
    logins: Any = None
    revocations: Any = None
    epochs: Any = None
    presence: Any = None


def gateway(router: Any = None, **overrides: Any) -> StandinGateway:
    """What ClientConnection needs of its node, built as ConnectionNode builds it."""
    cfg = config(**overrides)
    metrics = GatewayMetrics()
    return StandinGateway(config=cfg, router=router, metrics=metrics,
                          online=OnlineRegistry(metrics, cfg.max_connections_per_user),
                          auth=Authenticator(cfg, metrics), limiter=SendLimiter.from_config(cfg, metrics))


def token(user: int, device: int = 1, key: Optional[SigningKey] = None, ttl_s: int = 3600, **kw: Any) -> str:
    """A token the stand-in accepts (unless `key` or `kw`: audience, issuer, now, not_before say otherwise)."""
    kw.setdefault("audience", TOKEN_AUDIENCE_DEFAULT)
    kw.setdefault("issuer", TOKEN_ISSUER_DEFAULT)
    return issue_token(key or KEY, kw.pop("tenant", 0), user, device, ttl_s=ttl_s, **kw)


async def serve(gw: StandinGateway) -> tuple[asyncio.AbstractServer, str]:
    """A loopback listener whose connections are ClientConnections of `gw`; (server, "host:port")."""
    async def on_client(reader, writer):
        await ClientConnection(FramedStream(reader, writer), gw).run()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
