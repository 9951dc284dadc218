"""UserBadgeState on Redis (docs/decisions/0129-user-badge-state.md): the user's global
badge as an absolute value with a version that only grows, beside the session
projection's per-user keys on the user's mailbox instance.

Keys (with the session keys of qim/stores/redis/keys.py):
- `qim:badge:<tenant hex>:<user>`: HASH, `b` = the badge, `v` = its version (raised by
  every change of `b`), `c:<conversation hex>` = that conversation's contribution
  (absent = 0);
- `qim:badge:dirty`: HASH, one per mailbox instance like the first-registration queue:
  member "<tenant hex>:<user>:<conversation hex>" -> generation, raised by the session
  registration scripts (session_lib.lua, in the projection's batch, under its
  checkpoint) and by `mark` (MARK_READ, SET_CONVERSATION_STATE).

`settle` (badge_settle.lua) writes what a settler computed from canonical history and
drops only the marks it read (same generation), fenced by the shard's owner_epoch.
Errors: StoreUnavailable on an outage; NotOwner for a stale owner_epoch; StoreCorrupt
(`parse_dirty`) for a dirty member that is not of the shape above. `dirty` never raises
it: a member of another shape, or of user 0 (nobody's session), is deleted where it is
found and counted in `dropped_marks` (a bad mark must not stop every settle after it:
a settler task that died on one took its session node down at each restart).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from qim.stores.badges import Dirty
from qim.stores.errors import StoreCorrupt
from qim.stores.redis.keys import session_shard_checkpoint_key
from qim.stores.redis.mailboxes import mailbox_clients
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

MAX_USER_ID = 2**64 - 1

BADGE_DIRTY_KEY = "qim:badge:dirty"
BADGE_WAKE_KEY = "qim:badge:wake"  # ZSET per instance: dirty member -> ms to mark it again
# HASH per instance: "<tenant hex>:<user>" -> the version at which the badge last fell; the
# NotificationService's silent badge updates (decision 0135), one field per user at most
BADGE_FELL_KEY = "qim:badge:fell"
BADGE_SCRIPTS = ("badge_settle",)


def badge_key(tenant: int, user: int) -> str:
    """HASH, UserBadgeState of one user (module doc)."""
    return f"qim:badge:{tenant:032x}:{user}"


def dirty_member(tenant: int, user: int, conversation_id: bytes) -> str:
    """The dirty HASH member of (user, conversation)."""
    return f"{tenant:032x}:{user}:{conversation_id.hex()}"


def parse_dirty(member: bytes, generation: bytes) -> Dirty:
    """A dirty HASH entry -> Dirty; StoreCorrupt when it is not of the module doc's shape."""
    try:
        tenant_hex, user, conv = member.decode("ascii").split(":")
        conv_id = bytes.fromhex(conv)
        if len(tenant_hex) != 32 or len(conv_id) != 16 or not 1 <= int(user) <= MAX_USER_ID:
            raise ValueError(member)
        return Dirty(int(tenant_hex, 16), int(user), conv_id, member.decode("ascii"), generation.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise StoreCorrupt(
            f"badge dirty member {member[:80]!r} is not <tenant hex>:<user>:<conversation hex>"
        ) from None


class RedisBadgeStore:
    """UserBadgeState over the mailbox instances of a RedisTopology, or one client."""

    def __init__(self, client: Any) -> None:
        self._t = t = as_topology(client)
        self._scripts_of = {id(c): t.scripts(c, BADGE_SCRIPTS) for c in mailbox_clients(t)}
        self._cursors: dict[int, int] = {}
        self.dropped_marks = 0  # malformed dirty members deleted by `dirty` (module doc)

    def _user(self, tenant: int, user: int) -> Any:
        return self._t.home if self._t.single else self._t.user(tenant, user)

    def clients(self) -> list[Any]:
        """Every mailbox instance's client (each has one dirty HASH)."""
        return mailbox_clients(self._t)

    async def mark(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> None:
        """Mark (user, conversation) dirty: its contribution is settled again (a read
        position or a mute changed). StoreUnavailable on an outage."""
        with boundary("badge mark"):
            async with self._user(tenant, user).pipeline(transaction=False) as pipe:
                for conv in conversation_ids:
                    pipe.hincrby(BADGE_DIRTY_KEY, dirty_member(tenant, user, conv), 1)
                await pipe.execute()

    async def dirty(self, client: Any, count: int) -> list[Dirty]:
        """About `count` dirty entries of `client`'s instance (one HSCAN page; the cursor
        goes round the HASH page after page). A malformed member (or one of user 0) is
        deleted and counted in `dropped_marks`, not returned (module doc)."""
        with boundary("badge dirty scan"):
            cursor, page = await client.hscan(BADGE_DIRTY_KEY, self._cursors.get(id(client), 0), count=count)
        self._cursors[id(client)] = int(cursor)
        marks, bad = [], []
        for m, g in page.items():
            m = m if isinstance(m, bytes) else m.encode()
            try:
                marks.append(parse_dirty(m, g if isinstance(g, bytes) else str(g).encode()))
            except StoreCorrupt:
                bad.append(m)
        if bad:  # deleted, counted: settled for no user, and never a reason to stop
            with boundary("badge dirty drop"):
                await client.hdel(BADGE_DIRTY_KEY, *bad)
            self.dropped_marks += len(bad)
        return marks

    async def settle(
        self,
        shard: int,
        owner_epoch: int,
        tenant: int,
        user: int,
        values: dict[bytes, int],
        settled: Sequence[Dirty],
        wakes: Optional[dict[bytes, int]] = None,
    ) -> tuple[int, int, bool]:
        """Write `values` = {conversation_id: contribution} for the user, the badge and its
        version (raised when the badge changed), queue `wakes` = {conversation_id: ms
        since the epoch} to be marked again then (a mute that ends), drop `settled` marks
        not marked again; fenced by session shard `shard`'s owner_epoch. (badge,
        version, whether it changed). NotOwner when a newer owner fenced the shard."""
        client = self._user(tenant, user)
        args: list = [owner_epoch, len(values), f"{tenant:032x}:{user}:"]
        for conv, value in values.items():
            args += [conv.hex(), int(value), int((wakes or {}).get(conv, 0))]
        for d in settled:
            args += [d.member, d.generation]
        keys = [session_shard_checkpoint_key(shard), BADGE_DIRTY_KEY, badge_key(tenant, user), BADGE_WAKE_KEY,
                BADGE_FELL_KEY]
        badge, version, changed = await self._scripts_of[id(client)].call("badge_settle", keys, args)
        return int(badge), int(version), bool(int(changed))

    async def wake_due(self, client: Any, now_ms: int, count: int) -> int:
        """Mark again up to `count` queued wakes of `client`'s instance due by `now_ms`
        (one MULTI: the marks and their removal from the queue); how many."""
        with boundary("badge wakes"):
            due = await client.zrangebyscore(BADGE_WAKE_KEY, "-inf", now_ms, start=0, num=count)
            if not due:
                return 0
            async with client.pipeline(transaction=True) as pipe:
                for member in due:
                    pipe.hincrby(BADGE_DIRTY_KEY, member, 1)
                pipe.zrem(BADGE_WAKE_KEY, *due)
                await pipe.execute()
        return len(due)

    async def badges_of(self, tenant: int, users: Sequence[int]) -> dict[int, tuple[int, int]]:
        """{user: (badge, version)} (0, 0 for a user never settled): one pipelined round
        trip per instance, concurrently (the NotificationService's reader)."""

        async def read(client: Any, part: list[int]) -> list[tuple[int, int]]:
            with boundary("badges read"):
                async with client.pipeline(transaction=False) as pipe:
                    for u in part:
                        pipe.hmget(badge_key(tenant, u), "b", "v")
                    rows = await pipe.execute()
            return [(int(b or 0), int(v or 0)) for b, v in rows]

        unique = list(dict.fromkeys(users))
        got = await spread(self._t, unique, lambda u: self._user(tenant, u), read)
        return dict(zip(unique, got))
