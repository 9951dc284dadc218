"""Moving one commit bucket to another core Redis instance under traffic (`qimctl redis
move-bucket`, docs/decisions/0113-moving-a-commit-bucket.md; the MailboxShard move it
follows: shardmove.py, decision 0104).

A commit bucket's keys are every key carrying its hash tag `{bNNN}` (keys.py): commit
hashes and kept refusals (the idempotency keys), conversation_seq, the newest-id key
`qim:clast` (a conversation's ids never go backwards across the move), the in-flight
and unpublished sets, records, states, the hot history and its floor, archived states,
retention, group meta, members and snapshots. Nothing else of the core tier moves: the
writers' clock ceilings, writer leases and the archive's keys stay on the home, and
the revocation cutoffs are on every core instance already (decision 0100; the move
copies to the target any the target lacks, cutoffs from before it joined the list).

The steps, each safe to run again after a crash at any point:

1. **mark**: `moving:b<b>` = target in the placement map. Every process refuses the
   bucket's core calls from its next refresh (StoreUnavailable: the writer answers
   UNAVAILABLE, clients retry with the same client_message_id) or, when it cannot read
   the map, every core call (placement.py STALE_S). Refused when the target is not a
   core instance, the bucket is being moved elsewhere, or the target already holds keys
   of the bucket (another placement's: nothing is overwritten the move did not write).
2. **settle** SETTLE_S: every process has read the mark by then.
3. **copy** the bucket's keys (one SCAN of its tag) with DUMP/RESTORE REPLACE keeping
   each TTL, and the revocation cutoffs the target lacks; check that the source's key
   set did not change (a writer the mark did not stop: nothing switched, run it again).
4. **switch** in one MULTI: `bucket:<b>` = target (kept explicit even when the target
   is `b*n//256`: a pinned map must survive a longer list), `moving:b<b>` cleared, the
   version raised; then remove the bucket's keys from the source.

A re-run finds the mark and continues from step 2 with the same target (the copy
replaces its own partial copy: the source stays authoritative until the switch). A
re-run after the switch finds the bucket placed on the target and removes what is
left of it on the other core instances. One bucket move runs at a time: the move lock
(movelock.py, one for every bucket) is taken before anything is read, and the mark and
the switch are MULTIs under it; a second runner is refused at once, naming the first.
"""

from __future__ import annotations

from typing import Any, Callable

from qim.config.redislayout import RedisLayout
from qim.consts import COMMIT_BUCKET_COUNT
from qim.errors import EngineError
from qim.stores.redis.movelock import MoveLock, MoveRefused, bucket_lock_key
from qim.stores.redis.movesteps import mark_and_settle, pin, switch
from qim.stores.redis.placement import SETTLE_S, read_placement
from qim.stores.redis.shardkeys import BATCH, SCAN_COUNT, copy_keys

REVOKED_MATCH = b"qim:revoked:*"  # keys.revocation_key: on every core instance (decision 0100)


async def bucket_keys(client: Any, bucket: int) -> list[bytes]:
    """Every key of commit bucket `bucket` on `client` (one SCAN of its hash tag), sorted."""
    match = b"qim:*{b%03d}*" % bucket  # braces are literal in a SCAN pattern
    return sorted({k async for k in client.scan_iter(match=match, count=SCAN_COUNT)})


async def _unlink(client: Any, keys: list[bytes]) -> None:
    for i in range(0, len(keys), BATCH):
        await client.unlink(*keys[i:i + BATCH])


async def copy_revocations(home: Any, dst: Any) -> int:
    """The revocation cutoffs on `home` that `dst` lacks, copied with their TTLs (a
    cutoff both hold is the newest on both already: every revoke since `dst` joined the
    core list wrote it, decision 0100). Returns how many were copied."""
    keys = sorted({k async for k in home.scan_iter(match=REVOKED_MATCH, count=SCAN_COUNT)})
    missing = []
    for i in range(0, len(keys), BATCH):
        chunk = keys[i:i + BATCH]
        async with dst.pipeline(transaction=False) as pipe:
            for k in chunk:
                pipe.exists(k)
            missing += [k for k, there in zip(chunk, await pipe.execute()) if not there]
    return await copy_keys(home, dst, missing)


async def move_bucket(layout: RedisLayout, connect: Callable[[str], Any], bucket: int, target: str,
                      say: Callable[[str], None], settle_s: float = SETTLE_S) -> dict[str, Any]:
    """Move commit bucket `bucket` to core instance `target` (module doc). `connect`
    makes a client per address. Returns what was done (source, keys, revocations).
    MoveRefused for a refusal (nothing changed), EngineError / StoreUnavailable when an
    engine fails (the mark stays: run it again)."""
    if target not in layout.core:
        raise MoveRefused(f"--to {target} is not a core instance of this deployment "
                          f"(QIM_REDIS_CORE_ADDRS: {','.join(layout.core)})")
    if not 0 <= bucket < COMMIT_BUCKET_COUNT:
        raise MoveRefused(f"--bucket {bucket} is not a commit bucket (0..{COMMIT_BUCKET_COUNT - 1})")
    clients = {a: connect(a) for a in layout.core}
    try:
        async with MoveLock(clients[layout.home], bucket_lock_key(), f"bucket {bucket} -> {target}",
                            "move-bucket") as lock:
            return await _move(layout, clients, lock, bucket, target, say, settle_s)
    finally:
        for c in clients.values():
            await c.aclose()


async def _move(layout: RedisLayout, clients: dict[str, Any], lock: MoveLock, bucket: int, target: str,
                say: Callable[[str], None], settle_s: float) -> dict[str, Any]:
    home, dst = clients[layout.home], clients[target]
    placement = await read_placement(home)
    default = layout.core[layout.core_index(bucket)]
    source = placement.buckets.get(bucket, default)
    if source not in clients:
        raise MoveRefused(f"the placement map names {source} for commit bucket {bucket}, not a core instance "
                          "of this deployment: fix QIM_REDIS_CORE_ADDRS first")
    other = next(iter(placement.buckets_moving.items()), None)
    if other is not None and other[0] != bucket:
        raise MoveRefused(f"commit bucket {other[0]} is being moved to {other[1]}: run "
                          f"`qimctl redis move-bucket --bucket {other[0]} --to {other[1]}` to finish it first")
    marked = placement.buckets_moving.get(bucket)
    if marked is not None and marked != target:
        raise MoveRefused(f"commit bucket {bucket} is being moved to {marked}: run the move again with "
                          f"--to {marked} to finish it first")
    if marked is None and source == target:
        left = 0
        for addr, c in clients.items():
            if addr != target:
                keys = await bucket_keys(c, bucket)
                await _unlink(c, keys)
                left += len(keys)
        say(f"bucket {bucket} is on {target} already; removed {left} leftover key(s) elsewhere")
        return {"source": source, "keys": 0, "revocations": 0, "leftovers": left}
    await mark_and_settle(lock, f"bucket {bucket}", f"commit bucket {bucket}", source, target, marked,
                          f"moving:b{bucket}", lambda: bucket_keys(dst, bucket), say, settle_s)
    src = clients[source]
    revoked = await copy_revocations(home, dst) if dst is not home else 0
    keys = await bucket_keys(src, bucket)
    copied = await copy_keys(src, dst, keys)
    if await bucket_keys(src, bucket) != keys:
        raise EngineError(f"bucket {bucket}: its keys on {source} changed during the copy (a writer the mark did "
                          "not stop); nothing switched: run the move again")
    await switch(lock, f"bucket:{bucket}", f"moving:b{bucket}", target)  # explicit even for `b*n//256`
    await _unlink(src, keys)
    say(f"bucket {bucket}: on {target} now ({copied} keys and {revoked} revocation cutoff(s) copied; removed "
        f"from {source})")
    return {"source": source, "keys": copied, "revocations": revoked}


async def pin_buckets(layout: RedisLayout, connect: Callable[[str], Any]) -> int:
    """Write every commit bucket's current core instance into the placement map (those it
    does not name yet: `b*n//256` of this layout), so that a longer QIM_REDIS_CORE_ADDRS
    rolled out next places no bucket elsewhere (docs/operations.md, growing the core
    instances). Returns how many entries were added; one version change."""
    return await pin(connect, layout.home, lambda placement: {
        f"bucket:{b}": layout.core[layout.core_index(b)]
        for b in range(COMMIT_BUCKET_COUNT) if b not in placement.buckets})
