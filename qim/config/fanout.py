"""FanoutConfig: qim-fanout (FanoutCoordinator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.registry import RegistryConfig
from qim.consts import FANOUT_BATCH_DEFAULT, FANOUT_BATCH_MAX
from qim.faults import FANOUT_POINTS
from qim.topology import FANOUT


@dataclass(frozen=True)
class FanoutConfig:
    """qim-fanout (FanoutCoordinator)."""

    common: CommonConfig
    metrics_listen: str
    batch_size: int
    fault_point: str
    registry: Optional[RegistryConfig] = None  # Outbox partitions leased from the ShardRegistry

    @classmethod
    def from_env(cls, env: Env) -> "FanoutConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        metrics_listen = env.metrics_listen(FANOUT)
        return cls(
            common=CommonConfig.from_env(env),
            metrics_listen=metrics_listen,
            batch_size=env.integer("QIM_FANOUT_BATCH_SIZE", FANOUT_BATCH_DEFAULT, 1, FANOUT_BATCH_MAX),
            fault_point=env.fault_point("QIM_FANOUT_FAULT_POINT", ("QIM_FANOUT_METRICS_LISTEN",), FANOUT_POINTS),
            registry=RegistryConfig.from_env(env, FANOUT, metrics_listen),
        )
