"""Configuration from QIM_* environment variables, parsed once into frozen dataclasses.

Every value is validated at start; an invalid one raises ConfigError naming the
variable (DESIGN.md §11). Names reuse the seed's where they exist.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from qim.config_env import Env
from qim.config_registry import RegistryConfig
from qim.config_tier import TierConfig
from qim.config_tls import client_port_tls, internal_tls
from qim.consts import (
    FANOUT_BATCH_DEFAULT,
    FANOUT_BATCH_MAX,
    MAILBOX_RETENTION_MS_DEFAULT,
    MAILBOX_RETENTION_MS_MAX,
    MAILBOX_RETENTION_MS_MIN,
    MAX_CONNECTIONS_PER_USER_DEFAULT,
    MAX_MESSAGE_BODY,
    RATE_CONN_BURST_DEFAULT,
    RATE_CONN_PER_S_DEFAULT,
    RATE_USER_BURST_DEFAULT,
    RATE_USER_PER_S_DEFAULT,
    RECALL_WINDOW_MS_DEFAULT,
    SESSION_SNAPSHOT_TTL_MS,
    TOKEN_AUDIENCE_DEFAULT,
    TOKEN_ISSUER_DEFAULT,
    TOKEN_LEEWAY_S_DEFAULT,
    TOKEN_MAX_TTL_S_DEFAULT,
    WRITER_INFLIGHT_DEFAULT,
    WRITER_INFLIGHT_MAX,
)
from qim.faults import FANOUT_POINTS, MAILBOX_POINTS, WRITER_POINTS
from qim.net.tls import TlsFiles


@dataclass(frozen=True)
class CommonConfig:
    """What every service shares: Redis, Kafka bootstrap, shard count, tenant."""

    redis_addr: str
    kafka_bootstrap: str
    shard_count: int
    tenant: int
    allow_unsafe_dev: bool
    # the MessageStore backend and the archive tier (qim/config_tier.py)
    tier: TierConfig = TierConfig()

    @classmethod
    def from_env(cls, env: Env) -> "CommonConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        return cls(
            redis_addr=env.addr("QIM_REDIS_ADDR"),
            kafka_bootstrap=env.text("QIM_KAFKA_BOOTSTRAP"),
            shard_count=env.shard_count(),
            tenant=env.tenant(),
            allow_unsafe_dev=env.flag("QIM_REDIS_ALLOW_UNSAFE_DEV"),
            tier=TierConfig.from_env(env),
        )


@dataclass(frozen=True)
class WriterConfig:
    """qim-writer (ConversationWriter)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    writer_id: int  # 0 = lease one automatically
    region_id: int
    inflight_limit: int
    fault_point: str  # "" in production; see qim/services/writer/faults.py
    recovery_stale_ms: int
    recall_window_ms: int
    clock_skew_ms: int  # test/dev knob (QIM_CLOCK_SKEW_MS); 0 in production
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config_tls.py); None: plaintext development

    @classmethod
    def from_env(cls, env: Env) -> "WriterConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=env.addr("QIM_WRITER_LISTEN", "127.0.0.1:7101"),
            metrics_listen=env.metrics_listen("writer"),
            writer_id=env.integer("QIM_WRITER_ID", 0, 0, 65535),
            region_id=env.integer("QIM_REGION_ID", 0, 0, 65535),
            inflight_limit=env.integer("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", WRITER_INFLIGHT_DEFAULT, 1, WRITER_INFLIGHT_MAX),
            fault_point=env.fault_point("QIM_WRITER_FAULT_POINT", ("QIM_WRITER_LISTEN", "QIM_WRITER_METRICS_LISTEN"),
                                        WRITER_POINTS),
            recovery_stale_ms=env.integer("QIM_COMMIT_RECOVERY_STALE_MS", 5000, 100, 3_600_000),
            recall_window_ms=env.integer("QIM_RECALL_WINDOW_MS", RECALL_WINDOW_MS_DEFAULT, 0, 30 * 86_400_000),
            clock_skew_ms=env.clock_skew("QIM_CLOCK_SKEW_MS", ("QIM_WRITER_LISTEN", "QIM_WRITER_METRICS_LISTEN")),
        )
        return replace(cfg, internal_tls=internal_tls(env, {"QIM_WRITER_LISTEN": [cfg.listen]}))


@dataclass(frozen=True)
class GatewayConfig:
    """qim-gateway (ConnectionNode)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    push_listen: str
    writer_addrs: tuple[str, ...]
    # mailbox and session owners come from the ShardRegistry (`registry`); these lists
    # only name the loopback peers a plaintext development stack may dial
    mailbox_addrs: tuple[str, ...]
    session_addrs: tuple[str, ...]
    token_keys: tuple  # qim.wire.tokens.VerifyKey, by kid (QIM_TOKEN_PUBLIC_KEYS)
    inflight_limit: int
    max_body: int
    auth_timeout_s: float
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
    client_tls: Optional[TlsFiles] = None  # QIM_GATEWAY_TLS_* (qim/config_tls.py); None: plaintext development
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_*; None: plaintext development
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config_registry.py)

    @classmethod
    def from_env(cls, env: Env) -> "GatewayConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.addr("QIM_GATEWAY_LISTEN", "127.0.0.1:7100")
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=listen,
            metrics_listen=env.metrics_listen("gateway"),
            push_listen=env.addr("QIM_GATEWAY_PUSH_ADDR", "127.0.0.1:7104"),
            writer_addrs=env.addrs("QIM_WRITER_ADDRS", "127.0.0.1:7101"),
            mailbox_addrs=env.addrs("QIM_MAILBOX_ADDRS", "127.0.0.1:7102"),
            session_addrs=env.addrs("QIM_SESSION_ADDRS", "127.0.0.1:7103"),
            token_keys=env.token_keys(),
            inflight_limit=env.integer("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", WRITER_INFLIGHT_DEFAULT, 1, WRITER_INFLIGHT_MAX),
            max_body=env.integer("QIM_MAX_MESSAGE_BODY", MAX_MESSAGE_BODY, 1, MAX_MESSAGE_BODY),
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
        )
        peers = {"QIM_GATEWAY_PUSH_ADDR": [cfg.push_listen], "QIM_WRITER_ADDRS": cfg.writer_addrs,
                 "QIM_MAILBOX_ADDRS": cfg.mailbox_addrs, "QIM_SESSION_ADDRS": cfg.session_addrs}
        return replace(cfg, client_tls=client_port_tls(env, cfg.listen), internal_tls=internal_tls(env, peers),
                       registry=RegistryConfig.from_env(env, "gateway", listen))


@dataclass(frozen=True)
class FanoutConfig:
    """qim-fanout (FanoutCoordinator)."""

    common: CommonConfig
    metrics_listen: str
    batch_size: int
    fault_point: str
    registry: Optional[RegistryConfig] = None  # Outbox partitions owned through the ShardRegistry

    @classmethod
    def from_env(cls, env: Env) -> "FanoutConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        metrics_listen = env.metrics_listen("fanout")
        return cls(
            common=CommonConfig.from_env(env),
            metrics_listen=metrics_listen,
            batch_size=env.integer("QIM_FANOUT_BATCH_SIZE", FANOUT_BATCH_DEFAULT, 1, FANOUT_BATCH_MAX),
            fault_point=env.fault_point("QIM_FANOUT_FAULT_POINT", ("QIM_FANOUT_METRICS_LISTEN",), FANOUT_POINTS),
            registry=RegistryConfig.from_env(env, "fanout", metrics_listen),
        )


@dataclass(frozen=True)
class MailboxConfig:
    """qim-mailbox (MailboxNode); its shards are leased from the ShardRegistry (`registry`)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    gateway_push_addrs: tuple[str, ...]
    fault_point: str
    dp_gc_safety_ms: int  # 0: DispatchProgress GC disabled (the default)
    session_addrs: tuple[str, ...]  # loopback peers a plaintext development stack may dial (owners: the registry)
    retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT  # QIM_MAILBOX_RETENTION_MS: entries older are not served
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config_tls.py); None: plaintext development
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config_registry.py)

    @classmethod
    def from_env(cls, env: Env) -> "MailboxConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.addr("QIM_MAILBOX_LISTEN", "127.0.0.1:7102")
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=listen,
            metrics_listen=env.metrics_listen("mailbox"),
            gateway_push_addrs=env.addrs("QIM_GATEWAY_PUSH_ADDR", "127.0.0.1:7104"),
            fault_point=env.fault_point("QIM_MAILBOX_FAULT_POINT", ("QIM_MAILBOX_LISTEN", "QIM_MAILBOX_METRICS_LISTEN"),
                                        MAILBOX_POINTS),
            dp_gc_safety_ms=env.integer("QIM_DISPATCH_PROGRESS_GC_SAFETY_MS", 0, 0, 365 * 86_400_000),
            session_addrs=env.addrs("QIM_SESSION_ADDRS", "127.0.0.1:7103"),
            retention_ms=env.integer("QIM_MAILBOX_RETENTION_MS", MAILBOX_RETENTION_MS_DEFAULT, MAILBOX_RETENTION_MS_MIN,
                                 MAILBOX_RETENTION_MS_MAX),
        )
        peers = {"QIM_MAILBOX_LISTEN": [cfg.listen], "QIM_GATEWAY_PUSH_ADDR": cfg.gateway_push_addrs,
                 "QIM_SESSION_ADDRS": cfg.session_addrs}
        return replace(cfg, internal_tls=internal_tls(env, peers),
                       registry=RegistryConfig.from_env(env, "mailbox", listen))


@dataclass(frozen=True)
class SessionConfig:
    """qim-session (SessionProjection). Its session shards (the users' MailboxShard
    numbers: virtual bucket mod shard count) are leased from the ShardRegistry."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    gateway_push_addrs: tuple[str, ...]  # DEVICE_FRAMES (READ_SYNC, SESSION_DELTA) go to every gateway
    snapshot_ttl_ms: int
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config_tls.py); None: plaintext development
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config_registry.py)

    @classmethod
    def from_env(cls, env: Env) -> "SessionConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.addr("QIM_SESSION_LISTEN", "127.0.0.1:7103")
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=listen,
            metrics_listen=env.metrics_listen("session"),
            gateway_push_addrs=env.addrs("QIM_GATEWAY_PUSH_ADDR", "127.0.0.1:7104"),
            snapshot_ttl_ms=env.integer("QIM_SESSION_SNAPSHOT_TTL_MS", SESSION_SNAPSHOT_TTL_MS, 0, 3_600_000),
        )
        peers = {"QIM_SESSION_LISTEN": [cfg.listen], "QIM_GATEWAY_PUSH_ADDR": cfg.gateway_push_addrs}
        return replace(cfg, internal_tls=internal_tls(env, peers),
                       registry=RegistryConfig.from_env(env, "session", listen))
