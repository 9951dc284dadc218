"""The MailboxShard placement map: which mailbox instance holds a shard, as data that an
operator's move changes without a rehash (docs/decisions/0104-moving-a-mailbox-shard.md).

Without a map a shard lives on mailbox instance `s mod n` (decision 0096). The map is one
HASH on the home instance, `qim:placement`:

    v            the map's version, raised by every change (HINCRBY)
    shard:<s>    the 'host:port' of the mailbox instance holding shard s (an override)
    moving:<s>   the target of a move in progress: every call for shard s is refused
                 (StoreUnavailable, retried by its caller) until the move switches it
    bucket:<b>   the 'host:port' of the core instance holding commit bucket b (an
                 override of `b*n//256`; docs/decisions/0113)
    moving:b<b>  the target of a commit bucket's move in progress: every core call of
                 bucket b is refused (StoreUnavailable) until the move switches it

A service reads the map at start (`RedisBackend.check` / `ping`, the gateway's start)
and from then on a task of its own reads `v` every REFRESH_S (the whole map when `v`
moved), so every service sees a change within about a second whether or not it makes
calls. No call waits for the home; the hot path pays one monotonic clock read. Once a
map exists (version > 0), a service whose map could not be read for STALE_S refuses
every shard's calls (StoreUnavailable) until it can again: a move waits SETTLE_S after
its mark, longer than that, so no service can still be writing a shard the move copies.
A tool that never loaded the map (no task) refreshes lazily instead: a call at most
once per REFRESH_S starts one background read. A map naming an address that is not a
mailbox (for a shard) or core (for a bucket) instance of this process's layout is
refused whole (the previous map stays in
force, the error is kept in `error` and counted by
`qim_redis_placement_refresh_errors_total`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from prometheus_client import Counter

logger = logging.getLogger(__name__)

PLACEMENT_KEY = "qim:placement"
REFRESH_S = 1.0  # a change is seen within about this long by a process that makes calls
# a service that could not read the map for this long refuses shard calls (once a map exists)
STALE_S = 3.0 * REFRESH_S
# the move waits this long after marking a shard moving before it copies: every service
# has read the mark by then or refuses the shard's calls (STALE_S, with a margin)
SETTLE_S = STALE_S + 2.0 * REFRESH_S

# one per process, shown by the /metrics of the services that register it (qim/stores/open.py RedisPlacement)
REFRESH_ERRORS = Counter("qim_redis_placement_refresh_errors", "reads of the MailboxShard placement map that "
                         "failed or were refused (decision 0104)", registry=None)


@dataclass(frozen=True)
class Placement:
    """One version of the map: `shards` shard -> 'host:port' overrides, `moving` shard ->
    target of a move in progress; `buckets` and `buckets_moving` the same for commit
    buckets (decision 0113). Version 0 with nothing in it: the defaults `s mod n`, `b*n//256`."""

    version: int = 0
    shards: dict[int, str] = field(default_factory=dict)
    moving: dict[int, str] = field(default_factory=dict)
    buckets: dict[int, str] = field(default_factory=dict)
    buckets_moving: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict[Any, Any]) -> "Placement":
        """The map from its HASH fields (bytes or str); ValueError for a field it does not know."""
        version, shards, moving, buckets, bmoving = 0, {}, {}, {}, {}
        for k, v in raw.items():
            name = k.decode() if isinstance(k, bytes) else str(k)
            value = v.decode() if isinstance(v, bytes) else str(v)
            kind, _, shard = name.partition(":")
            if name == "v":
                version = int(value)
            elif kind == "shard" and shard.isdigit():
                shards[int(shard)] = value
            elif kind == "moving" and shard.isdigit():
                moving[int(shard)] = value
            elif kind == "bucket" and shard.isdigit():
                buckets[int(shard)] = value
            elif kind == "moving" and shard[:1] == "b" and shard[1:].isdigit():
                bmoving[int(shard[1:])] = value
            else:
                raise ValueError(f"unknown field {name!r} in {PLACEMENT_KEY}")
        return cls(version, shards, moving, buckets, bmoving)


async def read_placement(home: Any) -> Placement:
    """The map as stored on the home instance (one HGETALL)."""
    return Placement.parse(await home.hgetall(PLACEMENT_KEY))


class PlacementView:
    """A process's copy of the map over `home`, checked against `valid` (the mailbox
    addresses of its layout) and `core` (its core addresses, for bucket entries).
    `current` is the map in force; `load()` reads it now and starts the refresh task;
    `tick()` starts one refresh when no task runs and the last one is REFRESH_S old
    (never waits); `stale()` says the map may be out of date."""

    def __init__(self, home: Any, valid: tuple[str, ...], core: tuple[str, ...] = ()) -> None:
        self._home = home
        self._valid = frozenset(valid)
        self._core = frozenset(core)
        self.current = Placement()
        self.error = ""
        self._checked = float("-inf")  # monotonic time of the last refresh started
        self._task: Optional[asyncio.Task] = None
        self._loop: Optional[asyncio.Task] = None  # the refresh task of a service
        self._ok = float("-inf")  # monotonic time of the last successful read

    def tick(self) -> None:
        """Start a background refresh when due (inside a running loop; else nothing)."""
        now = time.monotonic()
        if self._loop is not None or now - self._checked < REFRESH_S or (
                self._task is not None and not self._task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._checked = now
        self._task = loop.create_task(self._refresh())

    async def load(self) -> Placement:
        """Read the whole map now and put it in force; ValueError when it names an address
        outside the layout (or a bad field), StoreUnavailable-like errors of the client."""
        got = await read_placement(self._home)
        self._apply(got)
        self._checked = self._ok = time.monotonic()
        if self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._refreshing())
        return got

    def stale(self) -> bool:
        """True when a refresh task runs, a map exists and no read succeeded for STALE_S."""
        return self._loop is not None and self.current.version > 0 and time.monotonic() - self._ok > STALE_S

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            await self._refresh()

    async def aclose(self) -> None:
        """Stop the refresh task."""
        for task in (self._loop, self._task):
            if task is not None:
                task.cancel()
        self._loop = None

    async def _refresh(self) -> None:
        try:
            raw = await self._home.hget(PLACEMENT_KEY, "v")
            if int(raw or 0) != self.current.version:
                self._apply(await read_placement(self._home))
            self._ok = time.monotonic()
            self.error = ""
        except Exception as exc:  # noqa: BLE001 - kept visible: `error`, the counter, a warning
            REFRESH_ERRORS.inc()
            if not self.error:
                logger.warning("placement map: refresh failed, the previous map stays in force: %s", exc)
            self.error = str(exc) or type(exc).__name__

    def _apply(self, got: Placement) -> None:
        bad = sorted({a for a in (*got.shards.values(), *got.moving.values()) if a not in self._valid})
        if bad:
            raise ValueError(f"{PLACEMENT_KEY} v{got.version} names {', '.join(bad)}, not a mailbox instance "
                             f"of this layout ({', '.join(sorted(self._valid))})")
        bad = sorted({a for a in (*got.buckets.values(), *got.buckets_moving.values()) if a not in self._core})
        if bad:
            raise ValueError(f"{PLACEMENT_KEY} v{got.version} names {', '.join(bad)} for a commit bucket, not a "
                             f"core instance of this layout ({', '.join(sorted(self._core))})")
        if got.version != self.current.version:
            logger.info("placement map v%d: %d shard(s) placed, %d moving; %d bucket(s) placed, %d moving",
                        got.version, len(got.shards), len(got.moving), len(got.buckets), len(got.buckets_moving))
        self.current = got
