"""Moving one MailboxShard to another mailbox instance under traffic (`qimctl redis
move-shard`, docs/decisions/0104-moving-a-mailbox-shard.md).

The steps, each safe to run again after a crash at any point:

1. **mark**: `moving:<s>` = target in the placement map (placement.py). Every process
   refuses the shard's calls from its next refresh (StoreUnavailable: callers retry)
   and its keepers release the shard's mailbox and session leases. Refused when the
   target is not a mailbox instance of the layout, when the shard is already being
   moved elsewhere, or when the target already holds keys of the shard (another
   placement's: nothing is overwritten that the move did not write).
2. **settle** SETTLE_S, then **hold**: the shard's mailbox and session leases taken by
   node "qimctl-move" as soon as nobody holds them, each under a new owner_epoch, and
   **fence** the source's watermark and session checkpoint with those epochs: no
   earlier owner can write there again.
3. **copy** the shard's keys (shardkeys.py) with DUMP/RESTORE REPLACE keeping TTLs, and
   its first-registration rows; check that the source's key set did not change.
4. **switch**: `shard:<s>` = target (kept explicit even when the target is `s mod n`:
   a pinned map must survive a longer list), `moving:<s>` cleared, the version raised,
   in one MULTI; then free the hold and remove the
   shard's keys from the source. Nodes read the new map within a refresh and take the
   shard under a higher owner_epoch (the fence they write on the target wins over the
   copied one).

A re-run finds the mark and continues from step 2 with the same target (the copy
replaces its own partial copy: the source stays authoritative until the switch). A
re-run after the switch finds the shard placed on the target and removes what is left
of it on the other mailbox instances. One runner per shard at a time: the move lock
(movelock.py) is taken before anything is read, and the mark and the switch are MULTIs
under it; a second runner is refused at once, naming the first.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from typing import Any, Callable

from qim.config.redislayout import RedisLayout
from qim.errors import EngineError
from qim.stores.redis.keys import registry_shard_key
from qim.stores.redis.movelock import PROGRESS_S, MoveLock, MoveRefused, shard_lock_key
from qim.stores.redis.movesteps import mark_and_settle, pin, switch
from qim.stores.redis.placement import SETTLE_S, read_placement
from qim.stores.redis.scripts import Scripts
from qim.stores.redis.shardkeys import copy_keys, copy_rows, delete_shard, fence_keys, queue_rows, shard_keys
from qim.topology import SHARDS, leasing

# the leased kinds that write a MailboxShard's keys: those leasing the users' shards (the service table)
KINDS = tuple(s.name for s in leasing() if s.leases == SHARDS)
HOLD_TTL_MS = 30_000  # the hold's lease; renewed every third of it while the copy runs


class _Hold:
    """The operator's leases of one shard over the registry (registry_hold.lua)."""

    def __init__(self, registry: Any, shard: int) -> None:
        self._s = Scripts(registry, ("registry_hold",))
        self.registry, self.shard = registry, shard
        self.keys = [registry_shard_key(kind, shard) for kind in KINDS]
        self.token = f"{os.getpid()}-{secrets.token_hex(6)}"
        self.epochs: list[int] = []

    async def take(self) -> list[int]:
        """The owner_epochs granted (0 where a node still holds the lease)."""
        return [int(e) for e in await self._s.call("registry_hold", self.keys, ["hold", self.token, HOLD_TTL_MS])]

    async def renew(self) -> None:
        """Keep the hold; EngineError when it was lost (the lease ran out and a node took it)."""
        while True:
            await asyncio.sleep(HOLD_TTL_MS / 3000)
            if await self.take() != self.epochs:
                raise EngineError("the move lost its hold of the shard's leases")

    async def free(self) -> None:
        """Release the leases (idempotent)."""
        await self._s.call("registry_hold", self.keys, ["free", self.token, 0])


async def move_shard(layout: RedisLayout, connect: Callable[[str], Any], registry_addr: str, shard: int,
                     target: str, say: Callable[[str], None], settle_s: float = SETTLE_S,
                     hold_wait_s: float = 60.0) -> dict[str, Any]:
    """Move MailboxShard `shard` to mailbox instance `target` (module doc). `connect`
    makes a client per address. Returns what was done (source, keys, rows, epochs).
    MoveRefused for a refusal, EngineError / StoreUnavailable when an engine fails (the
    mark stays: run it again)."""
    if target not in layout.mailbox:
        raise MoveRefused(f"--to {target} is not a mailbox instance of this deployment "
                          f"(QIM_REDIS_MAILBOX_ADDRS: {','.join(layout.mailbox)})")
    if not 0 <= shard < layout.shard_count:
        raise MoveRefused(f"--shard {shard} is not a MailboxShard (0..{layout.shard_count - 1})")
    clients = {a: connect(a) for a in dict.fromkeys((layout.home, registry_addr, *layout.mailbox))}
    try:
        async with MoveLock(clients[layout.home], shard_lock_key(shard), f"shard {shard} -> {target}",
                            "move-shard of this shard") as lock:
            return await _move(layout, clients, lock, registry_addr, shard, target, say, settle_s, hold_wait_s)
    finally:
        for c in clients.values():
            await c.aclose()


async def _move(layout: RedisLayout, clients: dict[str, Any], lock: MoveLock, registry_addr: str, shard: int,
                target: str, say: Callable[[str], None], settle_s: float, hold_wait_s: float) -> dict[str, Any]:
    home, dst = clients[layout.home], clients[target]
    placement = await read_placement(home)
    default = layout.mailbox[layout.mailbox_index(shard)]
    source = placement.shards.get(shard, default)
    if source not in clients:
        raise MoveRefused(f"the placement map names {source} for shard {shard}, not a mailbox instance of "
                          "this deployment: fix QIM_REDIS_MAILBOX_ADDRS first")
    marked = placement.moving.get(shard)
    if marked is not None and marked != target:
        raise MoveRefused(f"shard {shard} is being moved to {marked}: run the move again with --to {marked} "
                          "to finish it first")
    if marked is None and source == target:
        left = await _remove_leftovers(layout, clients, shard, target)
        say(f"shard {shard} is on {target} already; removed {left} leftover key(s) elsewhere")
        return {"source": source, "keys": 0, "rows": 0, "leftovers": left}
    await mark_and_settle(lock, f"shard {shard}", f"shard {shard}", source, target, marked, f"moving:{shard}",
                          lambda: shard_keys(dst, shard, layout.user_shard), say, settle_s)
    hold = _Hold(clients[registry_addr], shard)
    hold.epochs = await _take(hold, home, shard, target, hold_wait_s, say)
    say(f"shard {shard}: leases held under owner_epochs {hold.epochs} ({', '.join(KINDS)})")
    renewing = asyncio.ensure_future(hold.renew())
    try:
        src = clients[source]
        await Scripts(src, ("shard_move_fence",)).call("shard_move_fence", fence_keys(shard), hold.epochs)
        keys = await shard_keys(src, shard, layout.user_shard)
        rows = await queue_rows(src, shard, layout.user_shard)
        copied = await copy_keys(src, dst, keys)
        await copy_rows(dst, rows)
        if await shard_keys(src, shard, layout.user_shard) != keys:
            raise EngineError(f"shard {shard}: its keys on {source} changed during the copy (a writer the "
                              "mark did not stop); nothing switched: run the move again")
        if renewing.done():
            renewing.result()  # the hold was lost: raise before switching
        # the entry stays explicit even for the `s mod n` instance: the shard had an entry
        # (or it could not have left `s mod n`), amendment of decision 0104
        await switch(lock, f"shard:{shard}", f"moving:{shard}", target)
    finally:
        renewing.cancel()
    await hold.free()
    await delete_shard(src, keys, rows)
    say(f"shard {shard}: on {target} now ({copied} keys, {len(rows)} queue rows copied; removed from {source})")
    return {"source": source, "keys": copied, "rows": len(rows), "epochs": hold.epochs}


async def _take(hold: _Hold, home: Any, shard: int, target: str, wait_s: float,
                say: Callable[[str], None]) -> list[int]:
    """The hold's epochs once every kind's lease is free (the keepers release a shard
    marked moving at their next renewal), saying every PROGRESS_S which lease is still
    held by which node; MoveRefused naming the wait and the map's state as read then."""
    start = time.monotonic()
    told = start
    while True:
        epochs = await hold.take()
        if all(epochs):
            return epochs
        busy = [k for k, e in zip(KINDS, epochs) if not e]
        now = time.monotonic()
        if now - start >= wait_s:
            await hold.free()
            placement = await read_placement(home)  # say what is true now, not what was
            if placement.moving.get(shard) == target:
                state = f"the shard stays marked moving to {target}: run the move again"
            else:
                where = placement.shards.get(shard, "its default instance")
                state = (f"the shard is not marked moving to {target} any more (placed on {where}): "
                         "another run finished or undid this move; this run switched nothing")
            raise MoveRefused(f"shard {shard}: the {'/'.join(busy)} lease is still held after {wait_s:.0f} s "
                              f"({await _holders(hold, busy)}: a node that does not know the placement map?); "
                              f"{state}")
        if now - told >= PROGRESS_S:
            told = now
            say(f"shard {shard}: waiting for the {'/'.join(busy)} lease ({await _holders(hold, busy)}) to be "
                f"released: {now - start:.0f} s of {wait_s:.0f} s")
        await asyncio.sleep(0.5)


async def _holders(hold: _Hold, busy: list[str]) -> str:
    """The nodes holding the `busy` kinds' leases of the shard (the registry's lease HASH)."""
    names = []
    for kind in busy:
        node = await hold.registry.hget(registry_shard_key(kind, hold.shard), "node")
        names.append((node or b"?").decode(errors="replace"))
    return "held by node " + ", ".join(dict.fromkeys(names))


async def _remove_leftovers(layout: RedisLayout, clients: dict[str, Any], shard: int, placed: str) -> int:
    """Remove the keys of `shard` from every mailbox instance but `placed` (a move that
    crashed after its switch); returns how many."""
    n = 0
    for addr in dict.fromkeys(layout.mailbox):
        if addr == placed:
            continue
        keys = await shard_keys(clients[addr], shard, layout.user_shard)
        rows = await queue_rows(clients[addr], shard, layout.user_shard)
        await delete_shard(clients[addr], keys, rows)
        n += len(keys)
    return n


async def pin_shards(layout: RedisLayout, connect: Callable[[str], Any]) -> int:
    """Write every MailboxShard's current instance into the placement map (those it does
    not name yet: `s mod n` of this layout), so that a longer QIM_REDIS_MAILBOX_ADDRS
    rolled out next places no shard elsewhere (docs/operations.md, growing from N to
    N+1 instances). Returns how many entries were added; one version change."""
    return await pin(connect, layout.home, lambda placement: {
        f"shard:{s}": layout.mailbox[layout.mailbox_index(s)]
        for s in range(layout.shard_count) if s not in placement.shards})
