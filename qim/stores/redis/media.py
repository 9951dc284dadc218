"""RedisMediaLedger: the MediaLedger (qim/stores/media.py) on the Redis home instance
(issue 40; docs/decisions/0138).

Keys:
- `qim:media:quota:<tenant>:<user>:<day>`: bytes the user uploaded on UTC day `<day>`
  (days since the epoch), expiring two days later. `charge` is one Lua script (INCRBY
  only when the sum stays within the limit), so two nodes never both pass the limit.
- `qim:media:obj:<tenant>:<media_id>`: a hash {owner, device, key, mime, size, sha256,
  created_ms}; `qim:media:obj:<tenant>:u<upload id>` a multipart upload under way {owner,
  media_id, s3, size, sha256, mime, name, parts, day}, expiring.
- `qim:media:refs:<tenant>:<media_id>`: a set of the references to the object
  (docs/decisions/0139): `c:<conversation hex>:<client_message_id hex>:<ms>` written by
  the writer before it commits a MEDIA message, `m:<conversation hex>:<message_id hex>`
  after, in place of that `c:` (so a committed send no longer holds the object for the
  orphan window: a recalled one goes at the next sweep). `refer` adds one only while the object's record exists; `claim` deletes the
  record and the set only while the set is as the sweeper saw it (both Lua scripts), so
  a send racing the sweeper either is refused or keeps the object.
- `qim:media:sweep:<tenant>`: the sweeper's lease (one node sweeps at a time).
"""

from __future__ import annotations

from typing import Any, Optional

import redis.exceptions

from qim.stores.errors import StoreUnavailable

QUOTA_PREFIX = "qim:media:quota:"
OBJ_PREFIX = "qim:media:obj:"
REFS_PREFIX = "qim:media:refs:"
SWEEP_PREFIX = "qim:media:sweep:"
QUOTA_TTL_S = 2 * 86_400

# KEYS: the day's counter; ARGV: nbytes, limit, ttl. 1 charged, 0 over the limit.
_CHARGE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS: the record, its reference set; ARGV: the reference, the one it replaces ("" none).
# 1 added, 0 no such record.
_REFER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
if ARGV[2] ~= '' then redis.call('SREM', KEYS[2], ARGV[2]) end
return 1
"""

# KEYS: the record, its reference set; ARGV: the set's size the sweeper saw. 1 deleted.
_CLAIM = """
if redis.call('SCARD', KEYS[2]) ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""

# KEYS: the lease; ARGV: holder, ttl ms. 1 held (taken or renewed), 0 another holds it.
_LEASE = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class RedisMediaLedger:
    """The ledger on one redis.asyncio client (module doc); every method raises
    StoreUnavailable when Redis cannot be reached."""

    def __init__(self, client: Any, owns_client: bool = True) -> None:
        self._r = client
        self._owns = owns_client
        self._charge = client.register_script(_CHARGE)
        self._refer = client.register_script(_REFER)
        self._claim = client.register_script(_CLAIM)
        self._lease = client.register_script(_LEASE)

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"media ledger: {exc}") from exc

    async def charge(self, tenant: int, user: int, day: int, nbytes: int, limit: int) -> bool:
        """See MediaLedger.charge."""
        key = f"{QUOTA_PREFIX}{tenant}:{user}:{day}"
        return bool(int(await self._call(self._charge(keys=[key], args=[nbytes, limit, QUOTA_TTL_S]))))

    async def refund(self, tenant: int, user: int, day: int, nbytes: int) -> None:
        """See MediaLedger.refund."""
        await self._call(self._r.decrby(f"{QUOTA_PREFIX}{tenant}:{user}:{day}", nbytes))

    async def record(self, tenant: int, media_id: str, fields: dict[str, str], ttl_s: int = 0) -> None:
        """See MediaLedger.record (HSET, then EXPIRE with `ttl_s`, in one transaction)."""
        key = f"{OBJ_PREFIX}{tenant}:{media_id}"
        pipe = self._r.pipeline(transaction=True)
        pipe.hset(key, mapping=fields)
        if ttl_s:
            pipe.expire(key, ttl_s)
        await self._call(pipe.execute())

    async def forget(self, tenant: int, media_id: str) -> None:
        """See MediaLedger.forget."""
        await self._call(self._r.delete(f"{OBJ_PREFIX}{tenant}:{media_id}"))

    async def get(self, tenant: int, media_id: str) -> Optional[dict[str, str]]:
        """See MediaLedger.get."""
        raw = await self._call(self._r.hgetall(f"{OBJ_PREFIX}{tenant}:{media_id}"))
        return {_s(k): _s(v) for k, v in raw.items()} if raw else None

    async def refer(self, tenant: int, media_id: str, ref: str, replaces: str = "") -> bool:
        """Add `ref` to the object's references (module doc) and drop `replaces` in the same
        script (the writer's `m:` replaces its send's `c:` once committed): False when the
        object has no record (never uploaded, or swept as an orphan)."""
        keys = [f"{OBJ_PREFIX}{tenant}:{media_id}", f"{REFS_PREFIX}{tenant}:{media_id}"]
        return bool(int(await self._call(self._refer(keys=keys, args=[ref, replaces]))))

    async def refs(self, tenant: int, media_id: str) -> set[str]:
        """The object's references (module doc), empty when none."""
        return {_s(v) for v in await self._call(self._r.smembers(f"{REFS_PREFIX}{tenant}:{media_id}"))}

    async def claim(self, tenant: int, media_id: str, seen: int) -> bool:
        """Delete the record and references of `media_id` when it still has `seen`
        references (the sweeper's decision still holds): True when deleted."""
        keys = [f"{OBJ_PREFIX}{tenant}:{media_id}", f"{REFS_PREFIX}{tenant}:{media_id}"]
        return bool(int(await self._call(self._claim(keys=keys, args=[seen]))))

    async def media_ids(self, tenant: int) -> list[str]:
        """Every recorded media_id of `tenant` (SCAN, not uploads under way)."""
        prefix = f"{OBJ_PREFIX}{tenant}:"

        async def scan() -> list[str]:
            ids = [_s(k)[len(prefix) :] async for k in self._r.scan_iter(match=prefix + "*", count=1000)]
            return [m for m in ids if not m.startswith("u")]

        return list(await self._call(scan()))

    async def lease(self, tenant: int, holder: str, ttl_ms: int) -> bool:
        """Take or renew the sweeper's lease for `ttl_ms`: False while another holds it."""
        return bool(int(await self._call(self._lease(keys=[f"{SWEEP_PREFIX}{tenant}"], args=[holder, ttl_ms]))))

    async def close(self) -> None:
        """Close the client if this ledger owns it."""
        if self._owns:
            await self._r.aclose()
