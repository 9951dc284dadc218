"""RevocationStore: revoked tokens as a session epoch in time per (user, device), or for
a whole user (device 0), with a feed of revocations to every gateway (the Redis store and
its rules: qim/stores/redis/revocations.py; docs/decisions/0036-ops-tokens-jwks-revocation.md).

    store = open_revocations(redis_addr)
    await store.cutoffs([(tenant, user, device), ...])   # unix s, 0 = nothing revoked
    await store.revoke(tenant, user, device, cutoff_s, ttl_s)
    feed = await store.subscribe(); await feed.next()     # ((tenant, user, device), cutoff) | None
"""

from __future__ import annotations

from typing import Any


def open_revocations(addr: str) -> Any:
    """The RevocationStore on the commit Redis at 'host:port' (no I/O until the first call)."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.revocations import RevocationStore

    return RevocationStore(connect(addr, max_connections=8))
