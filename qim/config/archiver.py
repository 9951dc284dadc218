"""ArchiverConfig: qim-archiver (HistoryArchiver; docs/decisions/0023-archive-tier.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.registry import RegistryConfig
from qim.config.tier import ScyllaConfig
from qim.consts import ARCHIVE_BATCH_DEFAULT, ARCHIVE_BATCH_MAX
from qim.errors import ConfigError
from qim.faults import ARCHIVER_POINTS
from qim.topology import ARCHIVER


@dataclass(frozen=True)
class ArchiverConfig:
    """qim-archiver (HistoryArchiver): needs QIM_SCYLLA_ADDRS whatever the backend."""

    common: CommonConfig
    metrics_listen: str
    batch_size: int
    scylla: ScyllaConfig
    fault_point: str = ""  # QIM_ARCHIVER_FAULT_POINT (crash tests; loopback only)
    registry: Optional[RegistryConfig] = None  # Outbox partitions leased from the ShardRegistry

    @classmethod
    def from_env(cls, env: Env) -> "ArchiverConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        common = CommonConfig.from_env(env)
        if common.tier.scylla is None:
            raise ConfigError("QIM_SCYLLA_ADDRS is required by qim-archiver")
        metrics_listen = env.metrics_listen(ARCHIVER)
        return cls(common, metrics_listen,
                   env.integer("QIM_ARCHIVER_BATCH_SIZE", ARCHIVE_BATCH_DEFAULT, 1, ARCHIVE_BATCH_MAX),
                   common.tier.scylla,
                   env.fault_point("QIM_ARCHIVER_FAULT_POINT", ("QIM_ARCHIVER_METRICS_LISTEN",), ARCHIVER_POINTS),
                   RegistryConfig.from_env(env, ARCHIVER, metrics_listen))
