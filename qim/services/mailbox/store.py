"""Redis MailboxStore, phase one (DESIGN.md §5.4–5.5, §8; seed 001 §2.6).

Keys: `qim:mbx:<tenant_hex>:<user>` ZSET, score = 48-bit log offset, member =
mailbox_seq (8 bytes big-endian) ‖ event group (qim._core.eventgroup); `qim:dp:{s}:<id>`
DispatchProgress; `qim:wm:{s}` watermark hash (blob, layout, epoch). Range reads for a
zero cursor include offset 0 (seed lesson: the offset-0 exclusion bug).
"""

from __future__ import annotations

from typing import Optional

from qim._core import mailbox_seq as mseq
from qim.consts import MAILBOX_RETENTION_DAYS, WM_LAYOUT_V1
from qim.errors import EngineError, MailboxDirty
from qim.infra.redis.client import LuaScripts, ScriptError

RETENTION_S = MAILBOX_RETENTION_DAYS * 86400
SCRIPTS = ("materialize_dispatch",)


def mailbox_key(tenant: int, user_id: int) -> str:
    return f"qim:mbx:{tenant:032x}:{user_id}"


def dp_key(shard: int, dispatch_id: bytes) -> str:
    return f"qim:dp:{{s{shard}}}:{dispatch_id.hex()}"


def wm_key(shard: int) -> str:
    return f"qim:wm:{{s{shard}}}"


class RedisMailboxStore:
    """Materialization and range reads over one Redis instance.

    Errors: MailboxDirty for a digest conflict or a watermark moved by someone else
    (the shard must stop); EngineError when Redis fails (the shard stops, W unmoved).
    """

    def __init__(self, redis) -> None:
        self._redis = redis
        self._scripts = LuaScripts(redis, SCRIPTS)

    async def load_watermark(self, shard: int) -> tuple[Optional[bytes], int]:
        """(blob or None when never written, shard_epoch)."""
        blob, layout, epoch = await self._redis.hmget(wm_key(shard), "blob", "layout", "epoch")
        if blob is not None and int(layout or 0) != WM_LAYOUT_V1:
            raise MailboxDirty(f"shard {shard}: unknown watermark layout {layout!r}")
        return blob, int(epoch or 1)

    async def materialize(self, shard: int, epoch: int, tenant: int, dispatch_id: bytes, digest: bytes,
                          log_offset: int, members: list[tuple[int, bytes]], expected_wm: Optional[bytes],
                          new_wm: bytes) -> tuple[str, int]:
        """One fused begin → append → finish. `members` = [(user_id, member bytes)].
        Returns ("FRESH"|"DUPLICATE", mailbox_seq used by the entries)."""
        keys = [dp_key(shard, dispatch_id), wm_key(shard)] + [mailbox_key(tenant, u) for u, _ in members]
        seq = mseq.compose(epoch, log_offset)
        args = [digest, log_offset, mseq.to_bytes(seq), expected_wm or b"", new_wm, RETENTION_S, epoch]
        args += [m for _, m in members]
        try:
            status, used = await self._scripts.call("materialize_dispatch", keys, args)
        except ScriptError as exc:
            raise MailboxDirty(f"shard {shard} offset {log_offset}: {exc.reason}") from None
        return status.decode(), mseq.from_bytes(used)

    async def read_range(self, tenant: int, user_id: int, after_offset: int, upto_offset: int,
                         limit: int) -> list[tuple[bytes, int]]:
        """Members with after_offset < score <= upto_offset (after_offset -1 includes 0),
        at most `limit`, ascending, as (member, score)."""
        if upto_offset <= after_offset:
            return []
        try:
            rows = await self._redis.zrangebyscore(mailbox_key(tenant, user_id), f"({after_offset}", upto_offset,
                                                   start=0, num=limit, withscores=True)
        except Exception as exc:
            raise EngineError(f"mailbox read failed: {exc.__class__.__name__}") from exc
        return [(m, int(s)) for m, s in rows]
