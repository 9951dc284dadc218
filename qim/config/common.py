"""CommonConfig: what every service process shares (Redis, Kafka bootstrap, shard count,
tenant, the MessageStore backend and archive tier of qim/config/tier.py)."""

from __future__ import annotations

from dataclasses import dataclass

from qim.config.env import Env
from qim.config.tier import TierConfig


@dataclass(frozen=True)
class CommonConfig:
    """What every service shares: Redis, Kafka bootstrap, shard count, tenant."""

    redis_addr: str
    kafka_bootstrap: str
    shard_count: int
    tenant: int
    allow_unsafe_dev: bool
    # the MessageStore backend and the archive tier (qim/config/tier.py)
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
