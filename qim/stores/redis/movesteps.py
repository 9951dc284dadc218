"""The steps a MailboxShard move (shardmove.py, decision 0104) and a commit bucket move
(bucketmove.py, decision 0113) share: the mark and settle, the switch, and pinning every
unit's current instance in the placement map. What differs (which keys, the shard's
lease hold and fence, the bucket's revocation cutoffs) stays in the two modules; the
copy with DUMP/RESTORE keeping TTLs is shardkeys.copy_keys.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from qim.stores.redis.movelock import MoveLock, MoveRefused, wait_saying
from qim.stores.redis.placement import PLACEMENT_KEY, Placement, read_placement


async def mark_and_settle(
    lock: MoveLock,
    name: str,
    long_name: str,
    source: str,
    target: str,
    marked: str | None,
    moving_field: str,
    on_target: Callable[[], Awaitable[list[bytes]]],
    say: Callable[[str], None],
    settle_s: float,
) -> None:
    """Steps 1-2 of a move: unless the unit is marked already (`marked`, the map's
    `moving_field` value, the caller checked it is `target`), refuse when `on_target()`
    finds keys of the unit on the target (another placement's: nothing is overwritten
    the move did not write), else mark `moving_field` = target with the version raised
    in one MULTI under the move lock; then wait `settle_s` seconds so every process has
    read the mark. `name` ("shard 3", "bucket 7") and `long_name` ("commit bucket 7")
    word what `say` and MoveRefused tell the operator."""
    if marked is None:
        found = await on_target()
        if found:
            raise MoveRefused(
                f"{target} already holds {len(found)} key(s) of {long_name} (e.g. "
                f"{found[0].decode(errors='replace')}) from another placement: nothing was moved. "
                f"Remove them by running the move of {name} to its current instance "
                f"({source}), then move it again"
            )
        await lock.commit(lambda pipe: pipe.hset(PLACEMENT_KEY, moving_field, target).hincrby(PLACEMENT_KEY, "v", 1))
        say(f"{name}: marked moving {source} -> {target}; waiting {settle_s:.0f} s for every process to read the mark")
    else:
        say(f"{name}: continuing the move {source} -> {target} marked before")
    await wait_saying(settle_s, say, f"{name}: settling")


async def switch(lock: MoveLock, placed_field: str, moving_field: str, target: str) -> None:
    """The switch: `placed_field` = target, `moving_field` cleared and the version raised
    in one MULTI under the move lock. The entry stays explicit even when the target is
    the unit's default instance: a pinned map must outlive a longer address list
    (amendments of decisions 0104 and 0113)."""
    await lock.commit(
        lambda pipe: (
            pipe.hset(PLACEMENT_KEY, placed_field, target)
            .hdel(PLACEMENT_KEY, moving_field)
            .hincrby(PLACEMENT_KEY, "v", 1)
        )
    )


async def pin(connect: Callable[[str], Any], home_addr: str, missing: Callable[[Placement], dict[str, str]]) -> int:
    """Write into the placement map on `home_addr` the entries `missing(placement)` names
    (field -> instance address: the units the map does not place yet, at their default
    instance), in one MULTI with one version change. Returns how many were added."""
    home = connect(home_addr)
    try:
        add = missing(await read_placement(home))
        if add:
            async with home.pipeline(transaction=True) as pipe:
                pipe.hset(PLACEMENT_KEY, mapping=add)
                pipe.hincrby(PLACEMENT_KEY, "v", 1)
                await pipe.execute()
        return len(add)
    finally:
        await home.aclose()
