"""RevocationStore on Redis (the interface: qim/stores/revocations.py): which tokens are revoked, per (user, device) or for a whole user
(device 0), as a session epoch in time: tokens issued at or before the cutoff (their
`iat`, unix seconds) are refused at AUTH, and a connection authenticated with one is
closed (docs/operations.md "Tokens and keys"; docs/decisions/0036-ops-tokens-jwks-revocation.md).

Keys: qim/stores/redis/keys.py `revocation_key`, on the commit Redis. A revocation is a
SET with a TTL (the longest token lifetime and the leeway: then every token it refuses
has expired anyway) and a PUBLISH on REVOCATION_CHANNEL, which every gateway subscribes
to (`feed()`); a gateway whose subscription dropped checks its connections again once it
is back (`cutoffs`, after `subscribe`), so a revocation published meanwhile is not missed. Errors:
StoreUnavailable when Redis cannot be reached.
"""

from __future__ import annotations

from typing import Optional, Sequence

import redis.exceptions

from qim.stores.errors import StoreUnavailable
from qim.stores.redis.keys import REVOCATION_CHANNEL, revocation_key

Ident = tuple[int, int, int]  # (tenant, user_id, device_id)
FEED_POLL_S = 1.0


class RevocationStore:
    """Revocation cutoffs on one Redis (`client`: redis.asyncio, bytes replies)."""

    def __init__(self, client) -> None:
        self._r = client

    async def cutoffs(self, idents: Sequence[Ident]) -> list[int]:
        """For each (tenant, user, device): the newer of its own and its user's cutoff
        (0: nothing revoked). One round trip for all."""
        if not idents:
            return []
        keys = [k for t, u, d in idents for k in (revocation_key(t, u, d), revocation_key(t, u, 0))]
        try:
            values = await self._r.mget(keys)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"revocations: {exc}") from exc
        nums = [int(v) if v else 0 for v in values]
        return [max(nums[2 * i], nums[2 * i + 1]) for i in range(len(idents))]

    async def revoke(self, tenant: int, user_id: int, device_id: int, cutoff_s: int, ttl_s: int) -> int:
        """Refuse tokens of (user, device) (device 0: every device) issued at or before
        `cutoff_s`; keeps a newer cutoff already there. Returns how many gateways got the
        notice (PUBLISH's count)."""
        key = revocation_key(tenant, user_id, device_id)
        try:
            old = await self._r.get(key)
            cutoff = max(cutoff_s, int(old) if old else 0)
            await self._r.set(key, cutoff, ex=ttl_s)
            return int(await self._r.publish(REVOCATION_CHANNEL, f"{tenant:032x}:{user_id}:{device_id}:{cutoff}"))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"revocations: {exc}") from exc

    async def subscribe(self) -> "RevocationFeed":
        """The revocations published from now on (subscribed when this returns);
        StoreUnavailable when Redis cannot be reached."""
        pubsub = self._r.pubsub()
        try:
            await pubsub.subscribe(REVOCATION_CHANNEL)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            await pubsub.aclose()
            raise StoreUnavailable(f"revocation feed: {exc}") from exc
        return RevocationFeed(pubsub)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._r.aclose()


class RevocationFeed:
    """One subscription to REVOCATION_CHANNEL (RevocationStore.subscribe)."""

    def __init__(self, pubsub) -> None:
        self._ps = pubsub

    async def next(self) -> Optional[tuple[Ident, int]]:
        """((tenant, user, device), cutoff) of the next revocation, None after FEED_POLL_S
        without one; StoreUnavailable when the subscription dropped."""
        try:
            msg = await self._ps.get_message(ignore_subscribe_messages=True, timeout=FEED_POLL_S)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"revocation feed: {exc}") from exc
        if msg is None or msg.get("type") != "message":
            return None
        tenant_hex, user, device, cutoff = msg["data"].decode().split(":")
        return (int(tenant_hex, 16), int(user), int(device)), int(cutoff)

    async def close(self) -> None:
        """Unsubscribe and release the connection."""
        await self._ps.aclose()
