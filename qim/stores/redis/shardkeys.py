"""Which keys of one Redis instance belong to a MailboxShard, and copying them with their
TTLs (the move of docs/decisions/0104; the key families: keys.py, decision 0096 §3).

A shard owns its DispatchProgress (and its index), its watermark and its session
checkpoint, all tagged `{s<shard>}`, and the keys of its users: mailboxes, day
indexes, conversation sets, peers, checked marks, names, read positions, session
epochs, conversation states and receipt settings (decision 0122), named `<family><tenant hex>:<user>...` (a user's shard is its virtual bucket's
low bits, RedisLayout.user_shard). The first-registration queue is one ZSET per
instance: its rows of the shard's users move as rows.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from qim.stores.redis.keys import session_shard_checkpoint_key, ucs_pending_key, wm_key

# the families of a user's keys on a mailbox instance (keys.py): "<prefix><tenant hex>:<user>..."
USER_PREFIXES = (b"qim:mbx:", b"qim:mbxdays:", b"qim:convs:", b"qim:convpeer:", b"qim:convchecked:",
                 b"qim:name:", b"qim:read:", b"qim:sepoch:", b"qim:convstate:", b"qim:receipts:",
                 b"qim:push:", b"qim:badge:",  # qim:badge:dirty is the instance's, not a user's (decision 0129)
                 # the NotificationService's alert claims and badge versions sent (decision 0144): left
                 # behind, a replay of records older than the move would alert a device again
                 b"qim:notify:a:", b"qim:notify:bv:")
BATCH = 256  # keys per pipelined round trip
SCAN_COUNT = 1000


def _user_of(rest: bytes) -> tuple[int, int] | None:
    """(tenant, user) of "<tenant hex>:<user>[:...]"; None when it is not that shape."""
    parts = rest.split(b":", 2)
    if len(parts) < 2 or len(parts[0]) != 32 or not parts[1].isdigit():
        return None
    try:
        return int(parts[0], 16), int(parts[1])
    except ValueError:
        return None


def shard_of_key(key: bytes, user_shard: Callable[[int, int], int]) -> int | None:
    """The MailboxShard owning `key`, or None when it is no shard's (core keys, the queue)."""
    if key.startswith((b"qim:dp:{s", b"qim:dpidx:{s", b"qim:wm:{s", b"qim:session:ckpt:{s")):
        tag = key[key.index(b"{s") + 2:key.index(b"}")]
        return int(tag) if tag.isdigit() else None
    for prefix in USER_PREFIXES:
        if key.startswith(prefix):
            got = _user_of(key[len(prefix):])
            return None if got is None else user_shard(*got)
    return None


async def shard_keys(client: Any, shard: int, user_shard: Callable[[int, int], int]) -> list[bytes]:
    """Every key of `shard` on `client` (one SCAN of qim:* over the whole instance)."""
    out = []
    async for key in client.scan_iter(match=b"qim:*", count=SCAN_COUNT):
        if shard_of_key(key, user_shard) == shard:
            out.append(key)
    return sorted(out)


async def queue_rows(client: Any, shard: int, user_shard: Callable[[int, int], int]) -> list[tuple[bytes, float]]:
    """(member, score) of the first-registration queue rows of `shard`'s users on `client`."""
    rows = await client.zrange(ucs_pending_key(), 0, -1, withscores=True)
    return [(m, s) for m, s in rows if (u := _user_of(m)) is not None and user_shard(*u) == shard]


def fence_keys(shard: int) -> list[str]:
    """The two HASHes whose `oe` fences a shard's writers: watermark, session checkpoint."""
    return [wm_key(shard), session_shard_checkpoint_key(shard)]


async def copy_keys(src: Any, dst: Any, keys: Sequence[bytes]) -> int:
    """DUMP each key on `src` and RESTORE it on `dst` with its remaining TTL, replacing
    what `dst` holds under that name (a re-run after a crash copies again over its own
    partial copy); pipelined, BATCH keys per round trip. Returns the keys copied (a key
    that expired between the SCAN and its DUMP is skipped)."""
    copied = 0
    for i in range(0, len(keys), BATCH):
        chunk = keys[i:i + BATCH]
        async with src.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.dump(key)
                pipe.pttl(key)
            got = await pipe.execute()
        async with dst.pipeline(transaction=False) as pipe:
            n = 0
            for key, blob, ttl in zip(chunk, got[0::2], got[1::2]):
                if blob is None or ttl == -2:
                    continue
                pipe.restore(key, max(int(ttl), 0), blob, replace=True)
                n += 1
            if n:
                await pipe.execute()
        copied += n
    return copied


async def copy_rows(dst: Any, rows: Sequence[tuple[bytes, float]]) -> None:
    """The queue rows on `dst` with their scores (ZADD: a re-run writes the same rows)."""
    if rows:
        await dst.zadd(ucs_pending_key(), dict(rows))


async def delete_shard(client: Any, keys: Sequence[bytes], rows: Sequence[tuple[bytes, float]]) -> None:
    """Remove a moved shard's keys and queue rows from the instance it left."""
    for i in range(0, len(keys), BATCH):
        await client.unlink(*keys[i:i + BATCH])
    if rows:
        await client.zrem(ucs_pending_key(), *[m for m, _ in rows])
