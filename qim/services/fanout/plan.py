"""Deterministic planning of Outbox records (docs/design.md §5.3, seed 001 §2.4).

Direct and CONTROL messages carry their frozen recipients; a group message carries
(group conversation, membership_version) and its recipients are the member snapshot of
exactly that version (immutable, cached), never the current members. The plan depends
only on the record and that snapshot, so a replayed batch produces byte-identical
dispatches. Users are grouped by MailboxShard once per snapshot version (one BLAKE3
per member per version, not per message).
"""

from __future__ import annotations

import collections
from typing import Optional

from qim._core import ids
from qim._core.types import MessageCoord
from qim.errors import QimError
from qim.proto.v1 import internal_pb2
from qim.protocol import EventType
from qim.stores.errors import StoreCorrupt
from qim.stores.groups import GroupStore, SnapshotKey
from qim.wire.dispatch import Dispatch
from qim.wire.outbox import OutboxDecodeError
from qim.wire.outbox import decode as decode_outbox

SNAPSHOT_CACHE_VERSIONS = 4096


class PlanError(QimError):
    """The Outbox record cannot be planned (undecodable, shard_count differs, snapshot gone)."""


def parse_outbox(outbox_bytes: bytes, shard_count: int) -> internal_pb2.OutboxRecord:
    """Parse and check one Outbox record. PlanError on a bad record."""
    try:
        rec = decode_outbox(outbox_bytes)
    except OutboxDecodeError as exc:
        raise PlanError(str(exc)) from None
    if rec.shard_count != shard_count:
        raise PlanError(f"outbox record frozen with shard_count={rec.shard_count}, fanout runs {shard_count}")
    if len(rec.record.message_id) != 16 or not (rec.recipients or rec.group_conversation_id):
        raise PlanError("outbox record without message_id or audience")
    if len(rec.record.conversation_id) != 16 or rec.record.conversation_id[0] == 0:
        # docs/design.md §3: 16 bytes, byte 0 the kind; the producer is chosen by it
        raise PlanError("outbox record without a conversation_id")
    return rec


def snapshot_key(rec: internal_pb2.OutboxRecord) -> Optional[SnapshotKey]:
    """(tenant, group conversation, version) when the audience is a group snapshot."""
    if rec.recipients:
        return None
    return SnapshotKey(int.from_bytes(rec.record.tenant_id, "big"), rec.group_conversation_id,
                       rec.membership_version)


def by_shard(tenant: int, users, shard_count: int) -> dict[int, tuple[int, ...]]:
    """Users grouped by their MailboxShard, ascending within and across shards (one BLAKE3 per user)."""
    out: dict[int, list[int]] = {}
    for user in sorted(set(users)):
        out.setdefault(ids.mailbox_shard(tenant, user, shard_count), []).append(user)
    return {s: tuple(u) for s, u in sorted(out.items())}


def plan(rec: internal_pb2.OutboxRecord, shard_count: int,
         group_shards: Optional[dict[int, tuple[int, ...]]] = None) -> list[tuple[int, Dispatch]]:
    """[(target_shard, dispatch)] in ascending shard order. `group_shards` is the
    snapshot grouped by shard (required for a group audience). PlanError otherwise."""
    m = rec.record
    tenant = int.from_bytes(m.tenant_id, "big")
    if rec.recipients:
        targets = by_shard(tenant, rec.recipients, shard_count)
    elif group_shards is not None:
        targets = group_shards
    else:
        raise PlanError("group audience without its member snapshot")
    body = m.body if rec.inline_body else None
    coord = MessageCoord.of(m)
    return [(shard, Dispatch(
        tenant=tenant, dispatch_id=ids.dispatch_id(m.message_id, shard), coord=coord, target_shard=shard,
        client_message_id=m.client_message_id, recipients=users, body=body,
        event_type=rec.event_type or EventType.MESSAGE, trace_id=rec.trace_id if len(rec.trace_id) == 16 else b""))
        for shard, users in targets.items()]


class MemberSnapshotCache:
    """Member snapshots by (tenant, conversation, version), grouped by shard. Versions are
    immutable, so entries never go stale; the cache is bounded (LRU)."""

    def __init__(self, groups: GroupStore, shard_count: int, capacity: int = SNAPSHOT_CACHE_VERSIONS) -> None:
        self._groups = groups
        self._shard_count = shard_count
        self._capacity = capacity
        self._cache: collections.OrderedDict = collections.OrderedDict()

    async def load(self, wanted: set) -> dict:
        """{key: by-shard users} for every wanted key, one store read for the misses.
        PlanError when a snapshot is gone (it must outlive every replay window) or
        corrupt; StoreUnavailable (an EngineError: the batch replays) on an outage."""
        missing = [k for k in wanted if k not in self._cache]
        if missing:
            try:
                found = await self._groups.snapshots(missing)
            except StoreCorrupt as exc:
                raise PlanError(f"member snapshot unreadable: {exc.message}") from None
            for key, members in zip(missing, found):
                if members is None:
                    raise PlanError(f"member snapshot version {key[2]} of a group is missing")
                self._cache[key] = by_shard(key[0], members, self._shard_count)
        out = {}
        for key in wanted:
            self._cache.move_to_end(key)
            out[key] = self._cache[key]
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return out
