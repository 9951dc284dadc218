"""ModerationLog: the operators' moderation actions, one Redis stream on the home
instance (`qim:moderation:log`; docs/decisions/0123-moderation-notify.md item 6).

Every `qimctl moderation ban|unban|mute|unmute` appends one entry {at_ms, operator, action,
tenant, user, reason, until[, group]} before it acts, so an action is never taken unlogged (a failed
action is logged and then reported as failed by qimctl). Capped near LOG_MAX entries
(XADD MAXLEN ~). `entries(n)`: the newest n, newest first.
"""

from __future__ import annotations

import time
from typing import Any

import redis.exceptions

from qim.stores.errors import StoreUnavailable

LOG_KEY = "qim:moderation:log"
LOG_MAX = 100_000


class ModerationLog:
    """The stream on one Redis client (redis.asyncio, bytes replies); `close` closes it."""

    def __init__(self, client: Any) -> None:
        self._r = client

    async def record(self, operator: str, action: str, tenant: int, user: int, reason: str, until: int = 0,
                     group: int = 0) -> str:
        """Append one action; its stream id. `group`: the group_id of a group action (mute,
        unmute; decision 0127), a `group` field only then. StoreUnavailable when Redis
        cannot be written."""
        fields = {
            "at_ms": str(int(time.time() * 1000)),
            "operator": operator,
            "action": action,
            "tenant": str(tenant),
            "user": str(user),
            "reason": reason,
            "until": str(until),
        }
        if group:
            fields["group"] = str(group)
        try:
            got = await self._r.xadd(LOG_KEY, fields, maxlen=LOG_MAX, approximate=True)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"moderation log: {exc}") from exc
        return got.decode() if isinstance(got, bytes) else str(got)

    async def entries(self, count: int) -> list[dict[str, str]]:
        """The newest `count` actions, newest first, each with its stream `id`."""
        try:
            rows = await self._r.xrevrange(LOG_KEY, count=count)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"moderation log: {exc}") from exc
        return [{"id": i.decode(), **{k.decode(): v.decode() for k, v in f.items()}} for i, f in rows]

    async def close(self) -> None:
        """Close the client."""
        await self._r.aclose()
