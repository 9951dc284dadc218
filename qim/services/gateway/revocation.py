"""Token revocation at the ConnectionNode (qim/stores/revocations.py; docs/decisions/0036-ops-tokens-jwks-revocation.md).

`admit(conn, issued_at)`: at AUTH (and at a token refresh), after the connection is
registered, its (user, device) cutoff is read: a token issued at or before it is refused
with ERROR(UNAUTHENTICATED, "token revoked"), reason `revoked`. Checking after the
registration closes the race with a revocation published meanwhile (the cutoff is
written before it is published: either this read sees it or the feed finds the
connection). While the revocation list cannot be read (Redis down: the feed is not
subscribed, or the read fails) the AUTH is let in unchecked, counted in
`qim_gateway_revocation_unchecked_total`, and every online connection is checked again
as soon as the list answers: logins do not depend on Redis (nothing else of a session
works without it either), and a revoked device gets in at most until Redis is back.

`run()`: the subscription to revocations. Each one closes the matching connections
whose token was issued at or before the cutoff with KICKED{REVOKED} (within a second or
so of `qimctl token revoke`). When the subscription drops the gateway resubscribes with
bounded backoff and then checks every online connection once, so a revocation
published while it was away still closes its connections.

Sends do not depend on how soon the kick comes: each carries the token's iat to the
writer (`Actor.token_iat`), whose reserve refuses it once the cutoff is written
(docs/decisions/0080-revocation-checked-at-commit.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional, Protocol, Sequence

from qim.errors import EngineError, ErrorCode
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.stores.bans import Ban
from qim.wire.tokens import TokenRefused

logger = logging.getLogger(__name__)
BACKOFF_S = (0.2, 5.0)


Ident = tuple[int, int, int]  # (tenant, user_id, device_id)


class Feed(Protocol):
    """The revocation feed (qim/stores/redis/revocations.py RevocationFeed)."""

    async def next(self) -> Optional[tuple[Ident, int]]:
        """The next (ident, cutoff) published, None when nothing came (EngineError: lost)."""
        ...

    async def close(self) -> None:
        """Unsubscribe."""
        ...


class RevocationSource(Protocol):
    """The revocation list the watcher reads (qim/stores/revocations.py open_revocations)."""

    async def cutoffs(self, idents: Sequence[Ident]) -> list[int]:
        """The cutoff (unix s, 0: none) of each ident: its device's or its user's, the later."""
        ...

    async def subscribe(self) -> Feed:
        """Follow the revocations published from now on (EngineError when unreachable)."""
        ...

    async def ban_of(self, tenant: int, user_id: int) -> Optional[Ban]:
        """The moderation ban in force of the user, None when none (EngineError when unreachable)."""
        ...


class Revocable(Protocol):
    """What a device session gives the watcher at AUTH."""

    tenant: int
    user_id: int
    device_id: int
    token_iat: int

    def revoked(self, ban: Optional[Ban] = None) -> None:
        """Send KICKED{REVOKED} (KICKED{BANNED} with the ban's reason and end) and close."""


class BannedRefusal(TokenRefused):
    """AUTH of a banned user: ERROR BANNED "banned until …: reason" with `until_ms`
    (the ban's end, unix ms, 0 = until unbanned; docs/decisions/0123, Amendment 2)."""

    def __init__(self, ban: Ban) -> None:
        super().__init__("banned", ban.message())
        self.code = ErrorCode.BANNED
        self.ban, self.until_ms = ban, ban.until_ms


class Revocations:
    """Checks and applies revocations for one gateway (`online`: OnlineRegistry)."""

    def __init__(self, store: RevocationSource, online: OnlineRegistry, metrics: GatewayMetrics) -> None:
        self.store, self.online, self._m = store, online, metrics
        self.feed_up = False
        self.recheck_due = False  # a connection was let in unchecked: check everyone once the list answers

    def _unchecked(self) -> None:
        self.recheck_due = True
        self._m.revocation_unchecked.inc()

    async def admit(self, conn: Revocable) -> None:
        """TokenRefused("revoked") for a revoked token; let in unchecked (module doc)
        when the list cannot be read."""
        if not self.feed_up:
            return self._unchecked()
        try:
            cutoff = (await self.store.cutoffs([(conn.tenant, conn.user_id, conn.device_id)]))[0]
        except EngineError as exc:
            logger.warning("revocation list unreadable at AUTH (%s): let in, checked again later", exc)
            return self._unchecked()
        if conn.token_iat <= cutoff:
            ban = await self._ban(conn.tenant, conn.user_id)  # only on a refusal: no cost to a login that passes
            self._m.auth_refused.labels(reason="revoked" if ban is None else "banned").inc()
            if ban is not None:
                raise BannedRefusal(ban)
            raise TokenRefused("revoked", "token revoked for this device: sign in again")

    async def _ban(self, tenant: int, user_id: int) -> Optional[Ban]:
        """The user's ban in force, None when none or unreadable (then the device is told
        "token revoked": the refusal stands, only its words are plainer)."""
        try:
            return await self.store.ban_of(tenant, user_id)
        except EngineError as exc:
            logger.warning("ban record unreadable (%s): refused as revoked", exc)
            return None

    def apply(self, tenant: int, user_id: int, device_id: int, cutoff: int, ban: Optional[Ban] = None) -> int:
        """Close the matching connections (device 0: all of the user's; `ban`: with
        KICKED{BANNED}); how many."""
        closed = 0
        for conn in self.online.connections(tenant, user_id):
            if device_id in (0, conn.device_id) and conn.token_iat <= cutoff:
                conn.revoked(ban)
                closed += 1
        self._m.revoked_kicks.inc(closed)
        return closed

    async def recheck(self) -> None:
        """Every online connection against the stored cutoffs (after a feed gap)."""
        conns = self.online.connections()
        cutoffs = await self.store.cutoffs([(c.tenant, c.user_id, c.device_id) for c in conns])
        for conn, cutoff in zip(conns, cutoffs):
            if conn.token_iat <= cutoff:
                conn.revoked(await self._ban(conn.tenant, conn.user_id))
                self._m.revoked_kicks.inc()

    async def run(self) -> None:
        """Follow the revocation feed for the node's lifetime (module doc)."""
        delay, first = BACKOFF_S[0], True
        while True:
            feed = None
            try:
                feed = await self.store.subscribe()
                self.feed_up = True
                self._m.revocation_feed.set(1)
                if not first:  # subscribed first: nothing published from here on is missed
                    self.recheck_due = True
                first, delay = False, BACKOFF_S[0]
                while True:
                    if self.recheck_due:
                        self.recheck_due = False
                        try:
                            await self.recheck()
                        except EngineError:
                            self.recheck_due = True  # resubscribe, then check again
                            raise
                    item = await feed.next()
                    if item is not None:
                        (tenant, user, device), cutoff = item
                        # a user-wide cutoff with connections to close may be a ban: told as one
                        ban = (await self._ban(tenant, user) if device == 0 and self.online.connections(tenant, user)
                               else None)
                        n = self.apply(tenant, user, device, cutoff, ban)
                        logger.info("revocation of user %d device %d: %d connection(s) closed", user, device, n)
            except EngineError as exc:
                self.feed_up = False
                self._m.revocation_feed.set(0)
                logger.warning("revocation feed lost (%s); resubscribing in %.1fs", exc, delay)
                first = False
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_S[1])
            finally:
                if feed is not None:
                    await feed.close()
