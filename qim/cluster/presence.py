"""PresenceFollower: where the devices of a node's shards are online, from `qim.presence`
(docs/design.md §13 "Presence"; docs/decisions/0042-scale-presence.md; codec qim/wire/presence.py).

The owner of a shard assigns the shard's presence partition from its start (the topic is
compacted: reading it whole gives the current entries) and keeps, per user, every
(device, gateway) entry. An entry counts only while its gateway holds a live node lease
in the ShardRegistry and the entry was written by that lease's incarnation or a later
one (entries carry when their incarnation joined: a crashed gateway's entries stop
counting when its lease ends; a gateway restarted faster than that joined later, so its
old entries never count, while the new incarnation's entries count even before this
node's cached view of the registry noticed the restart), and before its expiry.
Nothing here is a remote call: the push path asks `gateways_of` and gets a set from memory.

`gateways_of` answers None while the shard's partition is still being read (the caller
then pushes to every gateway, as before presence existed). `on_online(key)` is called for
every new online entry of a caught-up shard (the mailbox wakes that device: a message
materialized between its login pull and this entry would otherwise wait for its next
pull), never for a renewal: the same session of the same gateway incarnation whose
entry still counted changed nothing, and waking it made every device pull every half
TTL for nothing (issue 33: 480 empty pulls a second for 2,400 devices at a 10 s TTL);
`on_replaced(key, session_epoch)` for every live entry of a device that has a newer
session on another gateway (the mailbox asks that gateway to kick exactly that
session), once per entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional

from qim.consts import PRESENCE_TOPIC
from qim.errors import EngineError
from qim.infra.kafka.consumer import EARLIEST, AsyncConsumer
from qim.wire.presence import PresenceError, PresenceKey, decode_entry, decode_key

logger = logging.getLogger(__name__)

Entry = tuple[int, int, int]  # (session_epoch, gateway since_ms, expires_at_ms)
LiveGateways = Callable[[], dict[str, int]]  # live gateway node id -> when its incarnation joined (ms)


def now_ms() -> int:
    """Wall clock in ms (entry expiries are absolute: PresenceEntry.expires_at_ms)."""
    return time.time_ns() // 1_000_000


class PresenceFollower:
    """The presence of the shards `add_shard` gave it. `live()` names the live gateways
    (OwnerTable of kind "gateway"); `on_bad()` counts records that do not decode."""

    def __init__(self, bootstrap: str, group: str, live: LiveGateways,
                 on_online: Optional[Callable[[PresenceKey], None]] = None,
                 on_replaced: Optional[Callable[[PresenceKey, int], None]] = None,
                 on_bad: Callable[[], None] = lambda: None) -> None:
        self._consumer = AsyncConsumer(bootstrap, group)
        self._live = live
        self._on_online = on_online
        self._on_replaced = on_replaced
        self._on_bad = on_bad
        # shard -> (tenant, user) -> (device, gateway) -> Entry
        self._users: dict[int, dict[tuple[int, int], dict[tuple[int, str], Entry]]] = {}
        self._catch_up: dict[int, int] = {}  # shards still being read -> the high watermark to reach
        self._next: dict[int, int] = {}
        self._replaced: set[tuple[PresenceKey, int]] = set()
        self._last_since: dict[str, int] = {}  # gateway -> the newest incarnation seen live

    def caught_up(self, shard: int) -> bool:
        """True once the shard's partition was read to the high watermark seen at add."""
        return shard in self._users and shard not in self._catch_up

    async def add_shard(self, shard: int) -> None:
        """Follow the presence of `shard` from the start of its partition (EngineError when
        the broker cannot say where that ends)."""
        high = (await self._consumer.high_watermarks(PRESENCE_TOPIC, [shard]))[shard]
        self._users[shard] = {}
        self._next[shard] = 0
        if high > 0:
            self._catch_up[shard] = high
        # the whole compacted partition, never a committed position (nothing is committed,
        # and asking the group coordinator for one stalled on a fresh broker: bridge.EARLIEST)
        await self._consumer.add_partitions(PRESENCE_TOPIC, {shard: EARLIEST})

    async def remove_shard(self, shard: int) -> None:
        """Forget the presence of `shard`. Never raises."""
        self._users.pop(shard, None)
        self._catch_up.pop(shard, None)
        self._next.pop(shard, None)
        try:
            await self._consumer.remove_partitions(PRESENCE_TOPIC, [shard])
        except EngineError as exc:
            logger.warning("presence partition %d: unassign failed: %s", shard, exc)

    def _live_now(self) -> dict[str, int]:
        live = self._live()
        for gw, since in live.items():
            if since > self._last_since.get(gw, -1):
                self._last_since[gw] = since
        return live

    def _counts(self, gw: str, entry: Entry, live: dict[str, int], now: int) -> bool:
        """A live gateway's entry of its current or a later incarnation; a gateway not
        (or no longer) listed: an entry of an incarnation later than any seen live (it
        joined after the cached view was read; a crashed one's entries stay out)."""
        if entry[2] <= now:
            return False
        since = live.get(gw)
        if since is not None:
            return entry[1] >= since
        return entry[1] > self._last_since.get(gw, -1)

    def gateways_of(self, shard: int, tenant: int, user: int) -> Optional[set[str]]:
        """The gateways holding one of the user's devices now; None while the shard's
        presence is still being read (push to every gateway then)."""
        if not self.caught_up(shard):
            return None
        devices = self._users[shard].get((tenant, user))
        if not devices:
            return set()
        live, now = self._live_now(), now_ms()
        return {gw for (_, gw), e in devices.items() if self._counts(gw, e, live, now)}

    def devices_of(self, shard: int, tenant: int, user: int) -> Optional[dict[str, set[int]]]:
        """gateway -> the user's devices online there; None while the shard is being read."""
        if not self.caught_up(shard):
            return None
        live, now = self._live_now(), now_ms()
        out: dict[str, set[int]] = {}
        for (device, gw), e in self._users[shard].get((tenant, user), {}).items():
            if self._counts(gw, e, live, now):
                out.setdefault(gw, set()).add(device)
        return out

    async def run(self) -> None:
        """Read the followed partitions until cancelled."""
        await self._consumer.assign(PRESENCE_TOPIC, {})
        while True:
            try:
                msgs = await self._consumer.consume(1024, 0.2)
            except EngineError as exc:
                logger.warning("presence read failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            for m in msgs:
                self._apply(m.partition(), m.offset(), m.key(), m.value())
            if self._catch_up:
                # compaction may have removed the last offsets: the fetch position says it all
                positions = await self._consumer.positions(PRESENCE_TOPIC, list(self._catch_up))
                for shard, high in list(self._catch_up.items()):
                    if max(self._next.get(shard, 0), positions.get(shard, -1)) >= high:
                        del self._catch_up[shard]

    def _apply(self, shard: int, offset: int, raw_key: Optional[bytes], raw_value: Optional[bytes]) -> None:
        users = self._users.get(shard)
        if users is None:
            return  # a shard given up
        self._next[shard] = offset + 1
        try:
            key = decode_key(raw_key or b"")
            entry = decode_entry(raw_value)
        except PresenceError:
            self._on_bad()
            return
        devices = users.setdefault((key.tenant, key.user), {})
        if entry is None:
            devices.pop((key.device, key.gateway), None)
            if not devices:
                users.pop((key.tenant, key.user), None)
            return
        before = devices.get((key.device, key.gateway))
        devices[(key.device, key.gateway)] = (entry.session_epoch, entry.gateway_since_ms, entry.expires_at_ms)
        if shard in self._catch_up:
            return  # reading the past: no wake-ups, no kicks for sessions long gone
        renewal = (before is not None and before[:2] == (entry.session_epoch, entry.gateway_since_ms)
                   and before[2] > now_ms())  # pushes kept reaching it: nothing to repair
        if self._on_online is not None and not renewal:
            self._on_online(key)
        self._kick_older(key.tenant, key.user, key.device, devices)

    def _kick_older(self, tenant: int, user: int, device: int, devices: dict[tuple[int, str], Entry]) -> None:
        """Every live entry of `device` but its newest session is a replaced one."""
        if self._on_replaced is None:
            return
        live, now = self._live_now(), now_ms()
        sessions = [(e[0], gw) for (d, gw), e in devices.items() if d == device and self._counts(gw, e, live, now)]
        if len(sessions) < 2:
            return
        newest = max(sessions)
        for epoch, gw in sessions:
            if (epoch, gw) == newest:
                continue
            key = PresenceKey(tenant, user, device, gw)
            if (key, epoch) not in self._replaced:
                self._replaced.add((key, epoch))
                self._on_replaced(key, epoch)
        if len(self._replaced) > 65536:  # kicks are sent once; an old memory of them is not needed
            self._replaced.clear()

    async def close(self) -> None:
        """Close the presence consumer."""
        await self._consumer.close()
