"""MessageStore on Redis (qim/stores/messages.py): records are STRINGs, the history index
a ZSET scored by conversation_seq, the state a STRING per recalled/deleted message; all in
the conversation's commit bucket (keys.py). Reads are pipelined: one round trip per
index read and one per batch of records; a read over several conversations makes those
round trips once per core instance holding some of them, the instances concurrently
(docs/decisions/0096; spread.py)."""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence

from google.protobuf.message import DecodeError

from qim.proto.v1 import message_pb2
from qim.stores.errors import StoreCorrupt
from qim.stores.intervals import Interval, ascending_ranges, descending_ranges
from qim.stores.messages import NEWER, OLDER, HistoryPage, MessageRef, Tail, TailQuery, VersionedRecord, budget_page
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.scripts import boundary, int_score_pairs
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

STATES = {b"RECALLED": message_pb2.MESSAGE_STATE_RECALLED, b"DELETED": message_pb2.MESSAGE_STATE_DELETED}


def parse_record(raw: bytes, where: str) -> message_pb2.MessageRecord:
    """A stored record; StoreCorrupt naming `where` when it does not decode."""
    try:
        return message_pb2.MessageRecord.FromString(raw)
    except DecodeError:
        raise StoreCorrupt(f"corrupt record {where}") from None


def _bound(hi: Optional[int]) -> str | int:
    return "+inf" if hi is None else hi


class RedisMessageStore:
    """MessageStore over the core instances of a RedisTopology (or one redis-py client;
    see the Protocol for shapes and errors): a conversation's keys on the instance of
    its commit bucket."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)

    def _of(self, tenant: int, conversation_id: bytes):
        """The client of the core instance holding the conversation."""
        return self._t.core(CommitKeys(tenant, conversation_id).bucket)

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """MessageStore.get: one GET; the version is the SHA-1 of the stored bytes."""
        with boundary("message read"):
            keys = CommitKeys(tenant, conversation_id)
            raw = await self._t.core(keys.bucket).get(keys.record(message_id))
        if raw is None:
            return None
        # the version is what the state change script compares (redis.sha1hex of the value)
        return VersionedRecord(parse_record(raw, "in MessageStore"), hashlib.sha1(raw).hexdigest())

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """MessageStore.record_sizes: one STRLEN per record, one pipeline."""
        async def sizes(client, part: list[MessageRef]) -> list[int]:
            with boundary("message sizes"):
                async with client.pipeline(transaction=False) as pipe:
                    for conv, mid in part:
                        pipe.strlen(CommitKeys(tenant, conv).record(mid))
                    return [int(n) for n in await pipe.execute()]
        return await spread(self._t, refs, lambda ref: self._of(tenant, ref[0]), sizes)

    async def resolve(self, tenant: int, records: Sequence[MessageRef],
                      states: Sequence[MessageRef]) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int]]:
        """MessageStore.resolve: GETs of records and state keys, one pipeline."""
        if not records and not states:
            return [], []
        async def gets(client, part: list[tuple[bool, MessageRef]]) -> list:
            with boundary("message resolve"):
                async with client.pipeline(transaction=False) as pipe:
                    for is_record, (conv, mid) in part:
                        keys = CommitKeys(tenant, conv)
                        pipe.get(keys.record(mid) if is_record else keys.state(mid))
                    return await pipe.execute()
        items = [(True, ref) for ref in records] + [(False, ref) for ref in states]
        replies = await spread(self._t, items, lambda item: self._of(tenant, item[1][0]), gets)
        recs = [None if raw is None else parse_record(raw, "in MessageStore") for raw in replies[:len(records)]]
        return recs, [STATES.get(s, message_pb2.MESSAGE_STATE_NORMAL) if s else message_pb2.MESSAGE_STATE_NORMAL
                      for s in replies[len(records):]]

    async def history_page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                           direction: int, limit: int, max_bytes: int) -> HistoryPage:
        """MessageStore.history_page: one ZRANGEBYSCORE per visible interval, then the records (two round trips)."""
        keys = CommitKeys(tenant, conversation_id)
        hist, client = keys.history(), self._t.core(keys.bucket)
        # one range query per visible interval (at most MEMBER_INTERVALS_MAX), one round
        # trip; the gaps between intervals are never read, so a page spans them unseen
        with boundary("history page"):
            async with client.pipeline(transaction=False) as pipe:
                if direction == NEWER:
                    for lo, hi in ascending_ranges(intervals, anchor):
                        pipe.zrangebyscore(hist, f"({lo}", _bound(hi), start=0, num=limit + 1, withscores=True)
                elif direction == OLDER:
                    for lo, hi in descending_ranges(intervals, anchor - 1 if anchor else None):
                        pipe.zrevrangebyscore(hist, _bound(hi), f"({lo}", start=0, num=limit + 1, withscores=True)
                else:
                    raise ValueError(f"unknown history direction {direction}")
                parts = await pipe.execute() if len(pipe) else []
            rows = [(mid, int(seq)) for part in parts for mid, seq in part][:limit + 1]
            page = rows[:limit]
            async with client.pipeline(transaction=False) as pipe:
                for mid, _ in page:
                    pipe.get(keys.record(mid))
                raws = await pipe.execute() if page else []
        return budget_page((_checked(raw, conversation_id, mid, seq) for (mid, seq), raw in zip(page, raws)),
                           len(rows) > limit, max_bytes)

    async def latest_seq(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> Optional[int]:
        """MessageStore.latest_seq: one ZREVRANGEBYSCORE LIMIT 1 per interval, one pipeline."""
        keys = CommitKeys(tenant, conversation_id)
        hist = keys.history()
        with boundary("history head"):
            async with self._t.core(keys.bucket).pipeline(transaction=False) as pipe:
                for lo, hi in descending_ranges(intervals, None):
                    pipe.zrevrangebyscore(hist, _bound(hi), f"({lo}", start=0, num=1, withscores=True)
                rows: list = next((r for r in await pipe.execute() if r), []) if len(pipe) else []
        return int(rows[0][1]) if rows else None

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
        """MessageStore.tails: index heads and windows in one pipeline, then every record
        needed in one (per core instance holding some of the conversations)."""
        return await spread(self._t, queries, lambda q: self._of(tenant, q.conversation_id),
                            lambda client, part: _tails_on(client, tenant, part, window))


async def _tails_on(client, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
    """MessageStore.tails over the conversations of one core instance (two round trips)."""
    plans = [(q, CommitKeys(tenant, q.conversation_id), descending_ranges(q.intervals, None)) for q in queries]
    with boundary("session heads"):
        async with client.pipeline(transaction=False) as pipe:  # raw replies: see int_score_pairs
            for q, keys, ranges in plans:
                for lo, hi in ranges:
                    pipe.execute_command("ZREVRANGEBYSCORE", keys.history(), _bound(hi), f"({lo}",
                                         "WITHSCORES", "LIMIT", 0, 1)
                for lo, hi in ranges:
                    pipe.execute_command("ZREVRANGEBYSCORE", keys.history(), _bound(hi), f"({max(lo, q.base)}",
                                         "WITHSCORES", "LIMIT", 0, window + 1)
            res = await pipe.execute()
        at = 0
        found: list[tuple[Optional[tuple[bytes, int]], Optional[list[tuple[bytes, int]]]]] = []
        for q, _, ranges in plans:
            n = len(ranges)
            head = next((p[0] for p in map(int_score_pairs, res[at:at + n]) if p), None)
            rows = None
            if head is not None and head[1] - q.base <= window:
                # exact: the window holds every visible message above the base
                rows = [p for part in res[at + n:at + 2 * n] for p in int_score_pairs(part)]
            found.append((head, rows))
            at += 2 * n
        wanted: dict[tuple[bytes, bytes], tuple[CommitKeys, int]] = {}
        for (q, keys, _), (head, rows) in zip(plans, found):
            for mid, seq in ([head] if head else []) + (rows or []):
                wanted.setdefault((q.conversation_id, mid), (keys, seq))
        # one MGET, not a pipeline of GETs: the same values, but a window of 200 records was
        # 200 commands packed and 200 replies parsed in Python per entry, and the badge's
        # settler summarizes every marked user each round (docs/perf.md "Round six: the
        # session's CPU per message")
        raws = await client.mget([keys.record(mid) for (_, mid), (keys, _) in wanted.items()]) if wanted else []
    records = {(conv, mid): _checked(raw, conv, mid, seq)
               for ((conv, mid), (_, seq)), raw in zip(wanted.items(), raws)}
    return [Tail(records[(q.conversation_id, head[0])] if head else None,
                 None if rows is None else [records[(q.conversation_id, m)] for m, _ in rows])
            for (q, _, _), (head, rows) in zip(plans, found)]


def _checked(raw: Optional[bytes], conv: bytes, mid: bytes, seq: int) -> message_pb2.MessageRecord:
    """Parse one record behind a history index entry and cross-check it."""
    if raw is None:
        raise StoreCorrupt(f"record missing at conversation_seq {seq} of {conv.hex()}")
    rec = parse_record(raw, f"at conversation_seq {seq} of {conv.hex()}")
    if rec.message_id != mid or rec.conversation_seq != seq or rec.conversation_id != conv:
        raise StoreCorrupt(f"history index and record disagree at conversation_seq {seq} of {conv.hex()}")
    return rec
