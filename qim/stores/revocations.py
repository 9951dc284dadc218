"""RevocationStore: revoked tokens as a session epoch in time per (user, device), or for
a whole user (device 0), with a feed of revocations to every gateway (the Redis store and
its rules: qim/stores/redis/revocations.py; docs/decisions/0036-ops-tokens-jwks-revocation.md).

    store = open_revocations(config.common.redis_layout)   # or one 'host:port'
    await store.cutoffs([(tenant, user, device), ...])   # unix s, 0 = nothing revoked
    await store.revoke(tenant, user, device, cutoff_s, ttl_s)
    feed = await store.subscribe(); await feed.next()     # ((tenant, user, device), cutoff) | None
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qim.config.redislayout import RedisLayout


def open_revocations(layout: "RedisLayout | str") -> Any:
    """The RevocationStore on the core instances of `layout` (a RedisLayout, or one
    'host:port' holding every role): a revocation is written to every core instance, read
    at AUTH and published on the home (docs/decisions/0100). No I/O until the first call."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.revocations import RevocationStore
    from qim.stores.redis.topology import topology_of

    return RevocationStore(topology_of(layout, lambda addr: connect(addr, max_connections=8)))
