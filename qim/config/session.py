"""SessionConfig: qim-session (SessionProjection)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.tls import service_tls
from qim.consts import SESSION_SNAPSHOT_TTL_MS
from qim.net.tls import TlsFiles
from qim.topology import SESSION, service


@dataclass(frozen=True)
class SessionConfig:
    """qim-session (SessionProjection). Node i of n serves users with user_id mod n == i;
    n is the length of QIM_SESSION_ADDRS, the same list the gateway and the mailbox
    route by, so they agree by construction. `peers`: the services it dials by name
    (Env.peers): "gateway" (DEVICE_FRAMES: READ_SYNC, SESSION_DELTA to every gateway)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    node_index: int
    node_count: int
    snapshot_ttl_ms: int
    peers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development

    @classmethod
    def from_env(cls, env: Env) -> "SessionConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.listen("QIM_SESSION_LISTEN")
        node_count = len(env.addrs(service(SESSION).addrs_var, listen))
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=listen,
            metrics_listen=env.metrics_listen(SESSION),
            node_index=env.integer("QIM_SESSION_NODE_INDEX", 0, 0, node_count - 1),
            node_count=node_count,
            snapshot_ttl_ms=env.integer("QIM_SESSION_SNAPSHOT_TTL_MS", SESSION_SNAPSHOT_TTL_MS, 0, 3_600_000),
            peers=env.peers(SESSION),
        )
        return replace(cfg, internal_tls=service_tls(env, SESSION, cfg.listen, cfg.peers))
