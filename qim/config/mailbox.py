"""MailboxConfig: qim-mailbox (MailboxNode)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.registry import RegistryConfig
from qim.config.tls import service_tls
from qim.consts import MAILBOX_RETENTION_MS_DEFAULT, MAILBOX_RETENTION_MS_MAX, MAILBOX_RETENTION_MS_MIN
from qim.faults import MAILBOX_POINTS
from qim.net.tls import TlsFiles
from qim.topology import MAILBOX


@dataclass(frozen=True)
class MailboxConfig:
    """qim-mailbox (MailboxNode); its shards are leased from the ShardRegistry (`registry`;
    docs/decisions/0040-scale-leases-and-fencing.md). The gateways it pushes to and the
    session owners it projects to come from the registry too; `peers` (Env.peers) only
    names the loopback peers a plaintext development stack may dial."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    fault_point: str
    dp_gc_safety_ms: int  # 0: DispatchProgress GC disabled (the default)
    peers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT  # QIM_MAILBOX_RETENTION_MS: entries older are not served
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development
    registry: Optional[RegistryConfig] = None  # the ShardRegistry (qim/config/registry.py)
    # QIM_MAILBOX_OVERTAKE: direct records overtake a shard's backlog (decisions/0142;
    # on by default since it was measured with 8 turns a node: decisions/0165)
    overtake: bool = True

    @classmethod
    def from_env(cls, env: Env) -> "MailboxConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=env.listen("QIM_MAILBOX_LISTEN"),
            metrics_listen=env.metrics_listen(MAILBOX),
            fault_point=env.fault_point("QIM_MAILBOX_FAULT_POINT", ("QIM_MAILBOX_LISTEN", "QIM_MAILBOX_METRICS_LISTEN"),
                                        MAILBOX_POINTS),
            dp_gc_safety_ms=env.integer("QIM_DISPATCH_PROGRESS_GC_SAFETY_MS", 0, 0, 365 * 86_400_000),
            peers=env.peers(MAILBOX),
            retention_ms=env.integer("QIM_MAILBOX_RETENTION_MS", MAILBOX_RETENTION_MS_DEFAULT, MAILBOX_RETENTION_MS_MIN,
                                     MAILBOX_RETENTION_MS_MAX),
            overtake=env.flag("QIM_MAILBOX_OVERTAKE", True),
        )
        return replace(cfg, internal_tls=service_tls(env, MAILBOX, cfg.listen, cfg.peers),
                       registry=RegistryConfig.from_env(env, MAILBOX, cfg.listen))
