"""GroupMutes: an operator's mute of a user in one group (`qimctl moderation mute`,
docs/decisions/0127-group-mute.md).

The mute that is enforced is one field of the group's meta HASH, `mute:<user>` =
"<until_ms>\\t<message>" (until_ms 0: no end), on the core instance of the group's commit
bucket: the reserving scripts already read that HASH on every group send and edit
(commit_lib.lua qim_group_check), so the check costs no round trip. `message` is what
the muted sender is told (POLICY_REFUSED). The listing is a HASH on the home instance,
`qim:moderation:mutes`: "<tenant>:<group_id>:<user>" -> JSON {until_ms, reason,
operator, at_ms}; an entry past its end is dropped when listed. Times are unix ms.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any, NamedTuple

import redis.exceptions

from qim._core import ids
from qim.stores.errors import NotFound, StoreUnavailable
from qim.stores.intervals import is_current
from qim.stores.redis.groups import RedisGroupStore
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.topology import RedisTopology

MUTES_KEY = "qim:moderation:mutes"
_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def mute_field(user: int) -> str:
    """The meta HASH field of `user`'s mute (the name commit_lib.lua reads)."""
    return f"mute:{user}"


def mute_message(until_ms: int, reason: str) -> str:
    """What the muted sender is told: the end (UTC, to the minute) and the reason."""
    if not until_ms:
        return f"you are muted in this group by a moderator: {reason}"
    end = datetime.fromtimestamp(until_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"you are muted in this group until {end}: {reason}"


class Mute(NamedTuple):
    """One listed mute: tenant, group_id, user, until_ms (0 no end), reason, operator, at_ms."""

    tenant: int
    group_id: int
    user: int
    until_ms: int
    reason: str
    operator: str
    at_ms: int


class GroupMutes:
    """Mutes over a RedisTopology (the CLI's own); StoreUnavailable when Redis cannot be
    reached, NotFound when the group does not exist."""

    def __init__(self, topology: RedisTopology) -> None:
        self._t = topology

    def _keys(self, tenant: int, group_id: int) -> CommitKeys:
        return CommitKeys(tenant, ids.conversation_id_group(tenant, group_id))

    async def check(self, tenant: int, group_id: int, user: int, member: bool) -> None:
        """Before an action is logged (decision 0123, Amendment): NotFound when the group
        does not exist, or (`member`) when `user` is not a current member of it."""
        conversation_id = ids.conversation_id_group(tenant, group_id)
        try:
            view = await RedisGroupStore(self._t).send_view(tenant, conversation_id, user)
        except _ERRORS as exc:
            raise StoreUnavailable(f"group mute: {exc}") from exc
        if view.version is None:
            raise NotFound(f"no group {group_id} in tenant {tenant}")
        if member and (view.intervals is None or not is_current(view.intervals)):
            raise NotFound(f"user {user} is not a member of group {group_id}")

    async def mute(self, tenant: int, group_id: int, user: int, until_ms: int, reason: str, operator: str) -> None:
        """Mute `user` in the group until `until_ms` (0: until unmuted); a second mute replaces the first."""
        keys = self._keys(tenant, group_id)
        core = self._t.core(keys.bucket)
        try:
            if not await core.hexists(keys.group_meta(), "ver"):
                raise NotFound(f"no group {group_id} in tenant {tenant}")
            await core.hset(keys.group_meta(), mute_field(user), f"{until_ms}\t{mute_message(until_ms, reason)}")
            entry = {"until_ms": until_ms, "reason": reason, "operator": operator, "at_ms": int(time.time() * 1000)}
            await self._t.home.hset(MUTES_KEY, f"{tenant}:{group_id}:{user}", json.dumps(entry))
        except _ERRORS as exc:
            raise StoreUnavailable(f"group mute: {exc}") from exc

    async def unmute(self, tenant: int, group_id: int, user: int) -> bool:
        """End the mute; False when `user` was not muted there."""
        keys = self._keys(tenant, group_id)
        try:
            gone = await self._t.core(keys.bucket).hdel(keys.group_meta(), mute_field(user))
            await self._t.home.hdel(MUTES_KEY, f"{tenant}:{group_id}:{user}")
        except _ERRORS as exc:
            raise StoreUnavailable(f"group mute: {exc}") from exc
        return bool(gone)

    async def listing(self, group_id: int = 0) -> list[Mute]:
        """The mutes in force (of one group when `group_id`), soonest end first, no end last;
        ended ones are removed from the listing (the scripts ignore them already)."""
        try:
            raw: dict[Any, Any] = await self._t.home.hgetall(MUTES_KEY)
        except _ERRORS as exc:
            raise StoreUnavailable(f"group mutes: {exc}") from exc
        now, out, ended = int(time.time() * 1000), [], []
        for field, value in raw.items():
            tenant, group, user = (int(x) for x in field.decode().split(":"))
            e = json.loads(value)
            if e["until_ms"] and e["until_ms"] <= now:
                ended.append(field)
            elif not group_id or group == group_id:
                out.append(Mute(tenant, group, user, e["until_ms"], e["reason"], e["operator"], e["at_ms"]))
        if ended:
            try:
                await self._t.home.hdel(MUTES_KEY, *ended)
            except _ERRORS as exc:
                raise StoreUnavailable(f"group mutes: {exc}") from exc
        return sorted(out, key=lambda m: (m.until_ms or 2**63, m.tenant, m.group_id, m.user))
