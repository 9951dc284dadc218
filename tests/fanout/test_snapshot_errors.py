"""Member snapshot failures in the fanout (docs/design.md §5.3 "a record it cannot plan stops
it"): a corrupt snapshot is unplannable (PlanError: the coordinator stops,
`qim_fanout_unplannable_records_total` and /healthz say so), an unreachable store is an
outage (an EngineError: the batch replays). Before issue 11 the corrupt bytes escaped
as a ValueError, which the coordinator turned into an endless silent replay."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.errors import EngineError
from qim.services.fanout.plan import MemberSnapshotCache, PlanError
from qim.stores.groups import SnapshotKey
from qim.stores.open import open_stores
from qim.stores.redis.keys import CommitKeys

SHARDS = 8


async def test_a_corrupt_snapshot_stops_planning_and_an_outage_replays(private_redis):
    conv = ids.conversation_id_group(0, 41)
    stores = open_stores(private_redis.addr)
    try:
        private_redis.client().set(CommitKeys(0, conv).group_snapshot(2), b"\x00" * 7)  # not 8 bytes a member
        with pytest.raises(PlanError, match="member snapshot unreadable"):
            await MemberSnapshotCache(stores.groups, SHARDS).load({SnapshotKey(0, conv, 2)})
    finally:
        await stores.close()
    dead = open_stores("127.0.0.1:1")
    try:
        with pytest.raises(EngineError):
            await MemberSnapshotCache(dead.groups, SHARDS).load({SnapshotKey(0, conv, 2)})
    finally:
        await dead.close()
