"""RedisMediaLedger: the MediaLedger (qim/stores/media.py) on the Redis home instance
(issue 40; docs/decisions/0138).

Keys:
- `qim:media:quota:<tenant>:<user>:<day>`: bytes the user uploaded on UTC day `<day>`
  (days since the epoch), expiring two days later. `charge` is one Lua script (INCRBY
  only when the sum stays within the limit), so two nodes never both pass the limit.
- `qim:media:obj:<tenant>:<media_id>`: a hash {owner, device, key, mime, size, sha256,
  created_ms}; `qim:media:obj:<tenant>:u<upload id>` a multipart upload under way {owner,
  media_id, s3, size, sha256, mime, name, parts, day}, expiring.
"""

from __future__ import annotations

from typing import Any, Optional

import redis.exceptions

from qim.stores.errors import StoreUnavailable

QUOTA_PREFIX = "qim:media:quota:"
OBJ_PREFIX = "qim:media:obj:"
QUOTA_TTL_S = 2 * 86_400

# KEYS: the day's counter; ARGV: nbytes, limit, ttl. 1 charged, 0 over the limit.
_CHARGE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
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

    async def close(self) -> None:
        """Close the client if this ledger owns it."""
        if self._owns:
            await self._r.aclose()
