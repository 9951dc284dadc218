"""CommonConfig: what every service process shares (Redis, Kafka bootstrap, shard count,
tenant, the MessageStore backend and archive tier of qim/config/tier.py)."""

from __future__ import annotations

from dataclasses import dataclass

from qim.config.env import Env
from qim.config.redislayout import RedisLayout
from qim.config.tier import TierConfig
from qim.errors import ConfigError


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
    # several standalone instances per role (decision 0096); empty: QIM_REDIS_ADDR
    redis_core_addrs: tuple[str, ...] = ()
    redis_mailbox_addrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.redis_core_addrs and self.redis_core_addrs[0] != self.redis_addr:
            # the tools, the room writer and the registry default address the home by it
            raise ConfigError("QIM_REDIS_ADDR must be the first of QIM_REDIS_CORE_ADDRS (the home instance)")

    @property
    def redis_layout(self) -> RedisLayout:
        """Which Redis instances hold what (qim/stores/redis/topology.py)."""
        return RedisLayout(self.redis_core_addrs or (self.redis_addr,),
                           self.redis_mailbox_addrs or (self.redis_addr,), self.shard_count)

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
            redis_core_addrs=env.addrs("QIM_REDIS_CORE_ADDRS") if env.raw("QIM_REDIS_CORE_ADDRS") else (),
            redis_mailbox_addrs=env.addrs("QIM_REDIS_MAILBOX_ADDRS") if env.raw("QIM_REDIS_MAILBOX_ADDRS") else (),
        )
