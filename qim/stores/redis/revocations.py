"""RevocationStore on Redis (the interface: qim/stores/revocations.py): which tokens are revoked, per (user, device) or for a whole user
(device 0), as a session epoch in time: tokens issued at or before the cutoff (their
`iat`, unix seconds) are refused at AUTH, and a connection authenticated with one is
closed (docs/operations.md "Tokens and keys"; docs/decisions/0036-ops-tokens-jwks-revocation.md).

Keys: qim/stores/redis/keys.py `revocation_key`. A revocation is a cutoff with a TTL (the
longest token lifetime and the leeway: then every token it refuses has expired anyway)
written to EVERY core instance, because the writer's reserve reads the sender's cutoffs
on the core instance of the conversation's commit bucket (decision 0080), then a PUBLISH
on REVOCATION_CHANNEL on the home instance, which every gateway subscribes to
(`subscribe()`); a gateway whose subscription dropped checks its connections again once
it is back (`cutoffs`, after `subscribe`), so a revocation published meanwhile is not
missed. AUTH reads the cutoffs on the home instance (one round trip; decision 0100).

A revoke that cannot write some core instance raises StoreUnavailable naming them and
publishes nothing; the instances it did write keep the cutoff, and a retry writes the
newest cutoff everywhere (each instance keeps the newer of its own and the new one,
atomically: lua/revocation_cutoff.lua), so retries converge. Errors: StoreUnavailable
when Redis cannot be reached.
"""

from __future__ import annotations

import asyncio
from typing import Optional, Sequence

import redis.exceptions

from qim.stores.errors import StoreUnavailable
from qim.stores.redis.bans import Ban, ban_of
from qim.stores.redis.keys import REVOCATION_CHANNEL, revocation_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology

Ident = tuple[int, int, int]  # (tenant, user_id, device_id)
SCRIPTS = ("revocation_cutoff",)
FEED_POLL_S = 1.0


class RevocationStore:
    """Revocation cutoffs on the core instances of a RedisTopology, or on one Redis
    (`client`: redis.asyncio, bytes replies); closes their clients on `close`."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._r = self._t.home  # AUTH reads, the pub/sub feed

    async def cutoffs(self, idents: Sequence[Ident]) -> list[int]:
        """For each (tenant, user, device): the newer of its own and its user's cutoff
        (0: nothing revoked). One round trip for all."""
        if not idents:
            return []
        if len(idents) == 1:  # AUTH: the logins of one loop turn share one pipelined round trip (issue 41)
            t, u, d = idents[0]
            scripts = self._t.scripts(self._r, ("revocation_read",), coalesce=True)
            with boundary("revocations"):
                return [int(await scripts.call("revocation_read", [revocation_key(t, u, d), revocation_key(t, u, 0)],
                                               []))]
        keys = [k for t, u, d in idents for k in (revocation_key(t, u, d), revocation_key(t, u, 0))]
        try:
            values = await self._r.mget(keys)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"revocations: {exc}") from exc
        nums = [int(v) if v else 0 for v in values]
        return [max(nums[2 * i], nums[2 * i + 1]) for i in range(len(idents))]

    async def revoke(self, tenant: int, user_id: int, device_id: int, cutoff_s: int, ttl_s: int) -> int:
        """Refuse tokens of (user, device) (device 0: every device) issued at or before
        `cutoff_s` on every core instance; each keeps a newer cutoff already there, and
        the newest cutoff found is written everywhere. Returns how many gateways got the
        notice (PUBLISH's count). StoreUnavailable naming the core instances not written
        (nothing published then; retry: decision 0100)."""
        key = revocation_key(tenant, user_id, device_id)
        kept = await self._write_everywhere(key, cutoff_s, ttl_s)
        if len(set(kept)) > 1:  # an instance held a newer cutoff (an earlier revoke): that one everywhere
            kept = await self._write_everywhere(key, max(kept), ttl_s)
        cutoff = kept[0]
        try:
            return int(await self._r.publish(REVOCATION_CHANNEL, f"{tenant:032x}:{user_id}:{device_id}:{cutoff}"))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"revocations: written to every core instance, not published: {exc}") from exc

    async def _write_everywhere(self, key: str, cutoff_s: int, ttl_s: int) -> list[int]:
        """The cutoff each core instance keeps after raising it to `cutoff_s` (all
        concurrently); StoreUnavailable naming every instance that could not be written."""
        clients = list(dict.fromkeys(self._t.core_clients))
        got = await asyncio.gather(*(self._t.scripts(c, SCRIPTS).call("revocation_cutoff", [key], [cutoff_s, ttl_s])
                                     for c in clients), return_exceptions=True)
        failed = [(self._t.addr_of(c), r) for c, r in zip(clients, got) if isinstance(r, BaseException)]
        if failed:
            names = ", ".join(f"{addr} ({exc})" for addr, exc in failed)
            raise StoreUnavailable(f"revocations: not written to {len(failed)} of {len(clients)} core "
                                   f"instance(s): {names}; retry the revocation") from failed[0][1]
        return [int(r) for r in got]  # type: ignore[arg-type]

    async def lift(self, tenant: int, user_id: int, device_id: int, cutoff_s: int, ttl_s: int) -> None:
        """Set the cutoff of (user, device) to `cutoff_s` on every core instance even when
        a later one is stored: the end of a moderation ban (qimctl moderation unban,
        docs/decisions/0123), whose cutoff lay in the future. Tokens issued up to
        `cutoff_s` stay refused. Nothing is published (no connection is to be closed).
        StoreUnavailable naming the core instances not written (retry)."""
        key = revocation_key(tenant, user_id, device_id)
        clients = list(dict.fromkeys(self._t.core_clients))
        got = await asyncio.gather(*(c.set(key, str(cutoff_s), ex=ttl_s) for c in clients), return_exceptions=True)
        failed = [self._t.addr_of(c) for c, r in zip(clients, got) if isinstance(r, BaseException)]
        if failed:
            raise StoreUnavailable(f"revocations: not lowered on {', '.join(failed)}; retry")

    async def ban_of(self, tenant: int, user_id: int) -> Optional[Ban]:
        """The moderation ban in force of the user (why a user-wide cutoff was written:
        bans.py), None when none. StoreUnavailable when the home cannot be read."""
        return await ban_of(self._r, tenant, user_id)

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
        """Close the connection pools."""
        await self._t.aclose()


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
