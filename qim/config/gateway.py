"""GatewayConfig: qim-gateway (ConnectionNode)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.registry import RegistryConfig
from qim.config.tls import client_port_tls, service_tls, ws_dev_listen, ws_origins
from qim.consts import (
    HEARTBEAT_S_DEFAULT,
    LOGIN_QUEUE_DEFAULT,
    LOGINS_INFLIGHT_DEFAULT,
    MAX_CONNECTIONS_PER_USER_DEFAULT,
    RATE_CONN_BURST_DEFAULT,
    RATE_CONN_PER_S_DEFAULT,
    RATE_USER_BURST_DEFAULT,
    RATE_USER_PER_S_DEFAULT,
    ROOMS_PER_CONNECTION_DEFAULT,
    TOKEN_AUDIENCE_DEFAULT,
    TOKEN_ISSUER_DEFAULT,
    TOKEN_LEEWAY_S_DEFAULT,
    TOKEN_MAX_TTL_S_DEFAULT,
    WRITER_INFLIGHT_DEFAULT,
    WRITER_INFLIGHT_MAX,
)
from qim.net.tls import TlsFiles
from qim.topology import GATEWAY


@dataclass(frozen=True)
class GatewayConfig:
    """qim-gateway (ConnectionNode). `peers`: the backends it dials by service name
    (Env.peers: "writer", "mailbox", "session", each from its QIM_<ENV>_ADDRS); the
    routing rule of each is its row in qim/topology.py: writers by rendezvous over the
    list, mailbox and session nodes by the owner of the user's shard in the ShardRegistry
    (`registry`; their lists only name the loopback peers a plaintext development stack
    may dial)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    push_listen: str
    token_keys: tuple  # qim.wire.tokens.VerifyKey, by kid (QIM_TOKEN_PUBLIC_KEYS; () with a JWKS only)
    inflight_limit: int
    max_body: int
    auth_timeout_s: float
    peers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    token_audience: str = TOKEN_AUDIENCE_DEFAULT
    token_issuer: str = TOKEN_ISSUER_DEFAULT
    token_leeway_s: int = TOKEN_LEEWAY_S_DEFAULT
    token_max_ttl_s: int = TOKEN_MAX_TTL_S_DEFAULT
    # send-rate token buckets for the mutating opcodes (0 per second: no limit) and the
    # cap on one user's connections to this gateway (qim/services/gateway/ratelimit.py)
    rate_user_per_s: int = RATE_USER_PER_S_DEFAULT
    rate_user_burst: int = RATE_USER_BURST_DEFAULT
    rate_conn_per_s: int = RATE_CONN_PER_S_DEFAULT
    rate_conn_burst: int = RATE_CONN_BURST_DEFAULT
    max_connections_per_user: int = MAX_CONNECTIONS_PER_USER_DEFAULT
    client_tls: Optional[TlsFiles] = None  # QIM_GATEWAY_TLS_* (qim/config/tls.py); None: plaintext development
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_*; None: plaintext development
    ws_origins: tuple[str, ...] = ()  # QIM_GATEWAY_WS_ORIGINS: browser origins allowed to open a WebSocket
    ws_listen: str = ""  # QIM_GATEWAY_WS_LISTEN: plain ws:// listener for development ("" = none)
    token_jwks: str = ""  # QIM_TOKEN_JWKS: a JWKS file or http(s) URL, keys by kid (qim/wire/jwks.py)
    token_jwks_refresh_s: int = 300  # QIM_TOKEN_JWKS_REFRESH_S
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config/registry.py)
    room_max_per_connection: int = ROOMS_PER_CONNECTION_DEFAULT  # QIM_ROOM_MAX_PER_CONNECTION
    # liveness and login admission (qim/services/gateway/keepalive.py, login.py; decisions 0077, 0078)
    heartbeat_s: int = HEARTBEAT_S_DEFAULT  # QIM_GATEWAY_HEARTBEAT_S: told in AUTH_OK/PONG; silence reaped
    logins_inflight: int = LOGINS_INFLIGHT_DEFAULT  # QIM_GATEWAY_LOGINS_INFLIGHT
    login_queue: int = LOGIN_QUEUE_DEFAULT  # QIM_GATEWAY_LOGIN_QUEUE

    @classmethod
    def from_env(cls, env: Env) -> "GatewayConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=env.listen("QIM_GATEWAY_LISTEN"),
            metrics_listen=env.metrics_listen(GATEWAY),
            push_listen=env.listen("QIM_GATEWAY_PUSH_ADDR"),
            peers=env.peers(GATEWAY),
            token_keys=env.token_keys() if env.raw("QIM_TOKEN_PUBLIC_KEYS") or not env.raw("QIM_TOKEN_JWKS") else (),
            token_jwks=env.raw("QIM_TOKEN_JWKS").strip(),
            token_jwks_refresh_s=env.integer("QIM_TOKEN_JWKS_REFRESH_S", 300, 5, 86_400),
            inflight_limit=env.integer("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", WRITER_INFLIGHT_DEFAULT, 1, WRITER_INFLIGHT_MAX),
            max_body=env.max_body(),
            auth_timeout_s=env.integer("QIM_AUTH_TIMEOUT_MS", 10_000, 100, 600_000) / 1000,
            token_audience=env.text("QIM_TOKEN_AUDIENCE", TOKEN_AUDIENCE_DEFAULT),
            token_issuer=env.text("QIM_TOKEN_ISSUER", TOKEN_ISSUER_DEFAULT),
            token_leeway_s=env.integer("QIM_TOKEN_LEEWAY_S", TOKEN_LEEWAY_S_DEFAULT, 0, 300),
            token_max_ttl_s=env.integer("QIM_TOKEN_MAX_TTL_S", TOKEN_MAX_TTL_S_DEFAULT, 60, 30 * 86_400),
            rate_user_per_s=env.integer("QIM_RATE_USER_PER_S", RATE_USER_PER_S_DEFAULT, 0, 1_000_000),
            rate_user_burst=env.integer("QIM_RATE_USER_BURST", RATE_USER_BURST_DEFAULT, 1, 1_000_000),
            rate_conn_per_s=env.integer("QIM_RATE_CONN_PER_S", RATE_CONN_PER_S_DEFAULT, 0, 1_000_000),
            rate_conn_burst=env.integer("QIM_RATE_CONN_BURST", RATE_CONN_BURST_DEFAULT, 1, 1_000_000),
            max_connections_per_user=env.integer("QIM_MAX_CONNECTIONS_PER_USER", MAX_CONNECTIONS_PER_USER_DEFAULT,
                                                 1, 65_536),
            room_max_per_connection=env.integer("QIM_ROOM_MAX_PER_CONNECTION", ROOMS_PER_CONNECTION_DEFAULT,
                                                1, 10_000),
            heartbeat_s=env.integer("QIM_GATEWAY_HEARTBEAT_S", HEARTBEAT_S_DEFAULT, 2, 600),
            logins_inflight=env.integer("QIM_GATEWAY_LOGINS_INFLIGHT", LOGINS_INFLIGHT_DEFAULT, 1, 10_000),
            login_queue=env.integer("QIM_GATEWAY_LOGIN_QUEUE", LOGIN_QUEUE_DEFAULT, 0, 1_000_000),
        )
        return replace(cfg, client_tls=client_port_tls(env, cfg.listen),
                       internal_tls=service_tls(env, GATEWAY, cfg.push_listen, cfg.peers),
                       ws_origins=ws_origins(env), ws_listen=ws_dev_listen(env),
                       registry=RegistryConfig.from_env(env, GATEWAY, cfg.listen))
