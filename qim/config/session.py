"""SessionConfig: qim-session (SessionProjection)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.registry import RegistryConfig
from qim.config.tls import service_tls
from qim.consts import SESSION_SNAPSHOT_TTL_MS
from qim.net.tls import TlsFiles
from qim.topology import SESSION


@dataclass(frozen=True)
class SessionConfig:
    """qim-session (SessionProjection). Its session shards (the users' MailboxShard
    numbers: virtual bucket mod shard count) are leased from the ShardRegistry
    (`registry`); the gateways it sends device frames to come from the registry too;
    `peers` (Env.peers) only names the loopback peers a plaintext development stack may dial."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    snapshot_ttl_ms: int
    peers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config/registry.py)

    @classmethod
    def from_env(cls, env: Env) -> "SessionConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.listen("QIM_SESSION_LISTEN")
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=listen,
            metrics_listen=env.metrics_listen(SESSION),
            snapshot_ttl_ms=env.integer("QIM_SESSION_SNAPSHOT_TTL_MS", SESSION_SNAPSHOT_TTL_MS, 0, 3_600_000),
            peers=env.peers(SESSION),
        )
        return replace(cfg, internal_tls=service_tls(env, SESSION, cfg.listen, cfg.peers),
                       registry=RegistryConfig.from_env(env, SESSION, listen))
