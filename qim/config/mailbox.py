"""MailboxConfig: qim-mailbox (MailboxNode)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.tls import service_tls
from qim.consts import MAILBOX_RETENTION_MS_DEFAULT, MAILBOX_RETENTION_MS_MAX, MAILBOX_RETENTION_MS_MIN
from qim.faults import MAILBOX_POINTS
from qim.net.tls import TlsFiles
from qim.topology import MAILBOX


@dataclass(frozen=True)
class MailboxConfig:
    """qim-mailbox (MailboxNode); node i of QIM_MAILBOX_NODE_COUNT owns shards s with s mod n == i.
    `peers`: the services it dials by name (Env.peers): "gateway" (PUSH_BATCH to every
    gateway's push listener) and "session" (low-latency PROJECTION, user u -> node u mod n)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    node_index: int
    node_count: int
    fault_point: str
    dp_gc_safety_ms: int  # 0: DispatchProgress GC disabled (the default)
    peers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT  # QIM_MAILBOX_RETENTION_MS: entries older are not served
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development

    @classmethod
    def from_env(cls, env: Env) -> "MailboxConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        node_count = env.integer("QIM_MAILBOX_NODE_COUNT", 1, 1, 1024)
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=env.listen("QIM_MAILBOX_LISTEN"),
            metrics_listen=env.metrics_listen(MAILBOX),
            node_index=env.integer("QIM_MAILBOX_NODE_INDEX", 0, 0, node_count - 1),
            node_count=node_count,
            fault_point=env.fault_point("QIM_MAILBOX_FAULT_POINT", ("QIM_MAILBOX_LISTEN", "QIM_MAILBOX_METRICS_LISTEN"),
                                        MAILBOX_POINTS),
            dp_gc_safety_ms=env.integer("QIM_DISPATCH_PROGRESS_GC_SAFETY_MS", 0, 0, 365 * 86_400_000),
            peers=env.peers(MAILBOX),
            retention_ms=env.integer("QIM_MAILBOX_RETENTION_MS", MAILBOX_RETENTION_MS_DEFAULT, MAILBOX_RETENTION_MS_MIN,
                                     MAILBOX_RETENTION_MS_MAX),
        )
        return replace(cfg, internal_tls=service_tls(env, MAILBOX, cfg.listen, cfg.peers))

    def owned_shards(self) -> list[int]:
        """Static assignment: shard s belongs to node s mod node_count."""
        return [s for s in range(self.common.shard_count) if s % self.node_count == self.node_index]
