"""ModerationLog: the operators' moderation actions, one Redis stream on the home
instance (`qim:moderation:log`; docs/decisions/0123-moderation-notify.md item 6, 0127).

Every `qimctl moderation ban|unban|mute|unmute|resolve` validates first and appends one
entry only for an action it then carries out; an action that still fails after its entry
(Redis lost mid-way, the writer refusing a delete) gets a second entry with the same
action and `outcome` "failed" and its `error` (decision 0123, Amendment). Every entry has
every field (FIELDS): `at_ms`, `operator`, `action`, `tenant`, `target_user` (the user
sanctioned: banned, unbanned, muted, the reported message's sender), `reporter` (a
report's resolution: who reported), `group` (a group_id: mute, unmute), `report` (the
report id), `reason` (the operator's), `until_ms` (0: no end), `outcome` ("" for the
action, "failed" for its failure), `error`. Times are unix ms. Entries written before
these fields (`user`, `until` in seconds) are read as the same shape (`normalize`).
Capped near LOG_MAX entries (XADD MAXLEN ~). `entries(n)`: the newest n, newest first.
"""

from __future__ import annotations

import re
import time
from typing import Any

import redis.exceptions

from qim.stores.errors import StoreUnavailable

LOG_KEY = "qim:moderation:log"
LOG_MAX = 100_000
FIELDS = ("at_ms", "operator", "action", "tenant", "target_user", "reporter", "group", "report", "reason",
          "until_ms", "outcome", "error")
_OLD_REPORT = re.compile(r"^report (\S+): ")  # an old resolution's reason named its report this way


def normalize(entry: dict[str, str]) -> dict[str, str]:
    """An entry with every FIELDS key. An old entry (before the explicit fields): `user`
    was the reporter for `resolve-report:none|remove-message` and the sanctioned user
    otherwise; `until` was unix seconds; a resolution's report id was in its reason."""
    out = {k: entry.get(k, "") for k in FIELDS}
    out["id"] = entry.get("id", "")
    if "target_user" not in entry:
        user = entry.get("user", "0")
        action = entry.get("action", "")
        as_reporter = action.startswith("resolve-report:") and action != "resolve-report:ban"
        out["target_user"], out["reporter"] = ("0", user) if as_reporter else (user, "0")
        until_s = entry.get("until", "0")
        out["until_ms"] = str(int(until_s) * 1000) if until_s.isdigit() else "0"
        found = _OLD_REPORT.match(entry.get("reason", ""))
        out["report"] = found.group(1) if found else ""
    for k in ("tenant", "target_user", "reporter", "group", "until_ms"):
        out[k] = out[k] or "0"
    return out


class ModerationLog:
    """The stream on one Redis client (redis.asyncio, bytes replies); `close` closes it."""

    def __init__(self, client: Any) -> None:
        self._r = client

    async def record(self, operator: str, action: str, tenant: int, *, target_user: int = 0, reporter: int = 0,
                     group: int = 0, report: str = "", reason: str = "", until_ms: int = 0, outcome: str = "",
                     error: str = "") -> str:
        """Append one entry (module doc: every field, times in unix ms); its stream id.
        StoreUnavailable when Redis cannot be written."""
        values = (str(int(time.time() * 1000)), operator, action, str(tenant), str(target_user), str(reporter),
                  str(group), report, reason, str(until_ms), outcome, error)
        try:
            got = await self._r.xadd(LOG_KEY, dict(zip(FIELDS, values)), maxlen=LOG_MAX, approximate=True)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"moderation log: {exc}") from exc
        return got.decode() if isinstance(got, bytes) else str(got)

    async def entries(self, count: int) -> list[dict[str, str]]:
        """The newest `count` entries, newest first, each normalized (every FIELDS key)
        with its stream `id`."""
        try:
            rows = await self._r.xrevrange(LOG_KEY, count=count)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"moderation log: {exc}") from exc
        return [normalize({"id": i.decode(), **{k.decode(): v.decode() for k, v in f.items()}}) for i, f in rows]

    async def close(self) -> None:
        """Close the client."""
        await self._r.aclose()
