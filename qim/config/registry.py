"""Configuration of a node's membership in the ShardRegistry (docs/design.md §13;
docs/decisions/0040-scale-leases-and-fencing.md; docs/operations.md "Several nodes of
each kind").

- QIM_NODE_ID: this process's node id, unique among the nodes of its kind; default
  "<service>@<listen address>" (stable across restarts, so a restarted node takes its own
  shards back at once). Two live processes with one id: the second refuses to start.
- QIM_REGISTRY_REDIS_ADDR: the registry's Redis (default QIM_REDIS_ADDR).
- QIM_SHARD_LEASE_MS (default 10000): how long a node's leases last without renewal: a
  dead or stalled node's shards are taken over within the lease + one renewal.
- QIM_SHARD_RENEW_MS (default a quarter of the lease, at most half of it).
- QIM_PRESENCE_TTL_MS (default 1 h): a gateway's PresenceEntry counts this long unless
  renewed (it renews every half); a crashed gateway's entries stop counting with its
  node lease anyway (docs/decisions/0042-scale-presence.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qim.config.env import Env
from qim.consts import PRESENCE_TTL_MS_DEFAULT, SHARD_LEASE_MS_DEFAULT
from qim.errors import ConfigError

NODE_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


@dataclass(frozen=True)
class RegistryConfig:
    """Where the registry is, this node's id and its lease times (ms)."""

    redis_addr: str
    node_id: str
    lease_ms: int = SHARD_LEASE_MS_DEFAULT
    renew_ms: int = SHARD_LEASE_MS_DEFAULT // 4
    presence_ttl_ms: int = PRESENCE_TTL_MS_DEFAULT

    @classmethod
    def from_env(cls, env: Env, service: str, default_addr: str) -> "RegistryConfig":
        """Read and validate; `default_addr` names the node by default
        ("<service>@<default_addr>"). ConfigError naming the first bad variable."""
        node_id = env.text("QIM_NODE_ID", f"{service}@{default_addr}")
        if not NODE_ID.fullmatch(node_id):
            raise ConfigError(f"QIM_NODE_ID={node_id!r}: 1-128 of A-Z a-z 0-9 . _ : @ -")
        lease = env.integer("QIM_SHARD_LEASE_MS", SHARD_LEASE_MS_DEFAULT, 500, 600_000)
        renew = env.integer("QIM_SHARD_RENEW_MS", lease // 4, 50, 300_000)
        if renew * 2 > lease:
            raise ConfigError(f"QIM_SHARD_RENEW_MS={renew} must be at most half of QIM_SHARD_LEASE_MS={lease}")
        presence_ttl = env.integer("QIM_PRESENCE_TTL_MS", PRESENCE_TTL_MS_DEFAULT, 10_000, 30 * 86_400_000)
        return cls(env.addr("QIM_REGISTRY_REDIS_ADDR", env.addr("QIM_REDIS_ADDR")), node_id, lease, renew,
                   presence_ttl)
