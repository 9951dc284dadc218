"""RedisReportStore: the ReportStore (qim/stores/reports.py) of the users' reports of messages, on the Redis home instance next to the
moderation log (docs/decisions/0124-user-reports.md).

Keys (all on the home instance):
- `qim:moderation:report:<id>`: a hash {id, at_ms, tenant, reporter, device, conversation_id
  (hex), message_id (hex), peer, reason, text, state (open|resolved), action, operator,
  resolution, resolved_at_ms}; `claim` resolves it once (a Lua call: one winner); `<id>` is the stream id of its entry in `qim:moderation:reports`.
- `qim:moderation:reports`: a stream of the report ids in arrival order (the listing),
  capped near REPORTS_MAX (XADD MAXLEN ~); a hash is removed with its entry's trim
  (EXPIRE REPORT_TTL_S on each hash bounds the hashes whose entries were trimmed).
- `qim:moderation:reportkey:<tenant>:<reporter>:<client_report_id hex>`: the idempotency
  key, the report's id (a retried REPORT is stored once).
- `qim:moderation:reports:undelivered`: a sorted set of the ids not yet accepted by the
  operator's webhook (score: at_ms); the ModerationService removes an id only after a 2xx.

`add` is one Lua script, so a report and its idempotency key, listing entry and
undelivered mark are written together or not at all.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple, Optional

import redis.exceptions

from qim.stores.errors import NotFound, StoreUnavailable

STREAM_KEY = "qim:moderation:reports"
UNDELIVERED_KEY = "qim:moderation:reports:undelivered"
REPORT_PREFIX = "qim:moderation:report:"
IDEM_PREFIX = "qim:moderation:reportkey:"
REPORTS_MAX = 100_000
REPORT_TTL_S = 90 * 86_400  # a report hash outlives its listing entry by at most this

# KEYS: idempotency key, stream, undelivered zset; ARGV: hash prefix, maxlen, ttl, at_ms, field pairs...
_ADD = """
local got = redis.call('GET', KEYS[1])
if got then return {got, 1} end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'at_ms', ARGV[4])
local key = ARGV[1] .. id
redis.call('HSET', key, 'id', id, 'at_ms', ARGV[4], 'state', 'open')
for i = 5, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', key, ARGV[3])
redis.call('SET', KEYS[1], id, 'EX', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], id)
return {id, 0}
"""


# KEYS: the report hash; ARGV: operator, action, resolution, resolved_at_ms. One winner:
# an open report becomes resolved by this call; otherwise what resolved it is returned
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
if redis.call('HGET', KEYS[1], 'state') ~= 'open' then
  local got = redis.call('HMGET', KEYS[1], 'resolved_at_ms', 'operator', 'action')
  return {'resolved', got[1] or '', got[2] or '', got[3] or ''}
end
redis.call('HSET', KEYS[1], 'state', 'resolved', 'operator', ARGV[1], 'action', ARGV[2], 'resolution', ARGV[3],
           'resolved_at_ms', ARGV[4])
return {'claimed'}
"""
# KEYS: the report hash; ARGV: operator, resolved_at_ms: open again only the claim it names
_REOPEN = """
local got = redis.call('HMGET', KEYS[1], 'state', 'operator', 'resolved_at_ms')
if got[1] ~= 'resolved' or got[2] ~= ARGV[1] or got[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'open')
redis.call('HDEL', KEYS[1], 'operator', 'action', 'resolution', 'resolved_at_ms')
return 1
"""


class Resolved(NamedTuple):
    """Who resolved a report: `at_ms` (0: before resolutions carried it), `operator`, `action`."""

    at_ms: int
    operator: str
    action: str


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class RedisReportStore:
    """The reports on one Redis client (the home instance; redis.asyncio). Every method
    raises StoreUnavailable when Redis cannot be reached; `close` closes the client when
    the store owns it (`owns_client`; the writer's shares the stores' home client)."""

    def __init__(self, client: Any, owns_client: bool = True) -> None:
        self._r = client
        self._owns = owns_client
        self._add = client.register_script(_ADD)
        self._claim = client.register_script(_CLAIM)
        self._reopen = client.register_script(_REOPEN)

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"reports: {exc}") from exc

    async def add(
        self, tenant: int, reporter: int, client_report_id: bytes, fields: dict[str, str]
    ) -> tuple[str, bool]:
        """Store one report of `reporter` (fields: device, conversation_id, message_id, peer,
        reason, text) unless (tenant, reporter, client_report_id) was stored: (id, duplicate)."""
        idem = f"{IDEM_PREFIX}{tenant}:{reporter}:{client_report_id.hex()}"
        argv: list[str] = [REPORT_PREFIX, str(REPORTS_MAX), str(REPORT_TTL_S), str(int(time.time() * 1000))]
        for k, v in {"tenant": str(tenant), "reporter": str(reporter), **fields}.items():
            argv += [k, v]
        got = await self._call(self._add(keys=[idem, STREAM_KEY, UNDELIVERED_KEY], args=argv))
        return _s(got[0]), bool(int(got[1]))

    async def get(self, report_id: str) -> Optional[dict[str, str]]:
        """One report's fields, None when there is none with this id."""
        raw = await self._call(self._r.hgetall(REPORT_PREFIX + report_id))
        return {_s(k): _s(v) for k, v in raw.items()} if raw else None

    async def listing(self, count: int, open_only: bool = False) -> list[dict[str, str]]:
        """The newest `count` reports (of the open ones with `open_only`), newest first."""
        out: list[dict[str, str]] = []
        last = "+"
        while len(out) < count:
            rows = await self._call(self._r.xrevrange(STREAM_KEY, max=last, count=max(count, 100)))
            rows = [r for r in rows if _s(r[0]) != last] if last != "+" else rows
            if not rows:
                break
            for rid, _ in rows:
                rep = await self.get(_s(rid))
                if rep is not None and (not open_only or rep.get("state") == "open"):
                    out.append(rep)
            last = _s(rows[-1][0])
        return out[:count]

    async def claim(self, report_id: str, operator: str, action: str, reason: str, at_ms: int) -> Optional[Resolved]:
        """Resolve an open report, once (one Lua call: of two operators at once one wins):
        None when this call resolved it, else the Resolved that stands (nothing changed).
        NotFound when there is no such report."""
        got = await self._call(self._claim(keys=[REPORT_PREFIX + report_id],
                                           args=[operator, action, reason, str(at_ms)]))
        state = _s(got[0])
        if state == "missing":
            raise NotFound(f"no report {report_id!r}")
        if state == "claimed":
            return None
        at = _s(got[1])
        return Resolved(int(at) if at.isdigit() else 0, _s(got[2]), _s(got[3]))

    async def reopen(self, report_id: str, operator: str, at_ms: int) -> bool:
        """Open again a report resolved by the claim of (`operator`, `at_ms`) whose action
        failed; False when another resolution stands."""
        return bool(await self._call(self._reopen(keys=[REPORT_PREFIX + report_id], args=[operator, str(at_ms)])))

    async def undelivered(self, count: int) -> list[dict[str, str]]:
        """The oldest `count` reports the webhook has not accepted yet (ids whose hash is
        gone are dropped from the set)."""
        ids = [_s(i) for i in await self._call(self._r.zrange(UNDELIVERED_KEY, 0, count - 1))]
        out = []
        for rid in ids:
            rep = await self.get(rid)
            if rep is None:
                await self.delivered([rid])
            else:
                out.append(rep)
        return out

    async def delivered(self, ids: list[str]) -> None:
        """The webhook accepted these reports (2xx): never sent again."""
        if ids:
            await self._call(self._r.zrem(UNDELIVERED_KEY, *ids))

    async def close(self) -> None:
        """Close the client if the store owns it."""
        if self._owns:
            await self._r.aclose()
