"""HotHistory on Redis (qim/stores/archive.py; docs/decisions/0023): history reads that agree with the
hot floor, for the TieredMessageStore.

Every read takes the conversation's floor in the same MULTI as the history index, so
the index it sees holds exactly the messages above that floor (the trim raises the floor
and deletes what it covers in one script). The records are read in a second MULTI with
the floor again: a trim in between changes the floor and the read is repeated (bounded;
StoreUnavailable after HOT_READ_ATTEMPTS), never served with a gap or a missing record.

A conversation's floor, index and records live on the core instance of its commit
bucket (docs/decisions/0096), so each MULTI stays on one instance; a read over several
conversations (tails, resolve, states) makes its round trips once per instance holding
some of them, the instances concurrently (spread.py), each instance's floors checked in
its own MULTI (a floor only guards its own conversation's reads).
"""

from __future__ import annotations

from typing import Optional, Sequence

from qim.proto.v1 import message_pb2
from qim.stores.archive import HotPage, HotTail
from qim.stores.errors import StoreUnavailable
from qim.stores.intervals import Interval, ascending_ranges, descending_ranges
from qim.stores.messages import NEWER, OLDER, MessageRef, TailQuery, VersionedRecord
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.messages import STATES, RedisMessageStore, _checked, parse_record
from qim.stores.redis.scripts import boundary, int_score_pairs
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

HOT_READ_ATTEMPTS = 5


def _bound(hi: Optional[int]) -> str | int:
    return "+inf" if hi is None else hi


def _state(raw: Optional[bytes]) -> int:
    return STATES.get(raw, message_pb2.MESSAGE_STATE_NORMAL) if raw else message_pb2.MESSAGE_STATE_NORMAL


def pending_states(members: list) -> dict[bytes, int]:
    """message_id -> state of an archived-states ZSET ("<hex>:<STATE>" members)."""
    out: dict[bytes, int] = {}
    for m in members:
        h, _, st = (m.decode() if isinstance(m, bytes) else m).partition(":")
        out[bytes.fromhex(h)] = STATES.get(st.encode(), message_pb2.MESSAGE_STATE_NORMAL)
    return out


async def _records(client, floor_keys: list[str], floors: list[int],
                   wanted: list[tuple[CommitKeys, bytes]]) -> Optional[list[Optional[bytes]]]:
    """The records' bytes (one MULTI on `client`, the instance of every key given), or
    None when a floor moved since `floors` were read."""
    async with client.pipeline(transaction=True) as pipe:
        for k in floor_keys:
            pipe.get(k)
        for keys, mid in wanted:
            pipe.get(keys.record(mid))
        got = await pipe.execute()
    if [int(v or 0) for v in got[:len(floor_keys)]] != floors:
        return None
    return got[len(floor_keys):]


class RedisHotHistory:
    """HotHistory over the core instances of a RedisTopology (or one redis-py client;
    see the Protocol)."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._messages = RedisMessageStore(self._t)  # record reads are the MessageStore's own

    def _of(self, tenant: int, conversation_id: bytes):
        """The client of the core instance holding the conversation."""
        return self._t.core(CommitKeys(tenant, conversation_id).bucket)

    async def page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                   direction: int, limit: int) -> HotPage:
        """HotHistory.page: floor + index (MULTI), then floor + records (MULTI)."""
        keys = CommitKeys(tenant, conversation_id)
        hist, client = keys.history(), self._t.core(keys.bucket)
        queries: list[tuple]
        if direction == NEWER:
            queries = [("ZRANGEBYSCORE", hist, f"({lo}", _bound(hi)) for lo, hi in ascending_ranges(intervals, anchor)]
        elif direction == OLDER:
            queries = [("ZREVRANGEBYSCORE", hist, _bound(hi), f"({lo}")
                       for lo, hi in descending_ranges(intervals, anchor - 1 if anchor else None)]
        else:
            raise ValueError(f"unknown history direction {direction}")
        with boundary("history page"):
            for _ in range(HOT_READ_ATTEMPTS):
                async with client.pipeline(transaction=True) as pipe:
                    pipe.get(keys.floor())
                    pipe.zrange(keys.archived_states(), 0, -1)
                    for q in queries:
                        pipe.execute_command(*q, "WITHSCORES", "LIMIT", 0, limit + 1)
                    got = await pipe.execute()
                floor, pending = int(got[0] or 0), pending_states(got[1])
                rows = [(m, s) for part in got[2:] for m, s in int_score_pairs(part) if s > floor][:limit + 1]
                page = rows[:limit]
                if not page:
                    return HotPage(floor, [], len(rows), pending)
                raws = await _records(client, [keys.floor()], [floor], [(keys, mid) for mid, _ in page])
                if raws is None:
                    continue
                return HotPage(floor, [_checked(raw, conversation_id, mid, seq) for (mid, seq), raw in zip(page, raws)],
                               len(rows), pending)
        raise StoreUnavailable("history page: the hot floor kept moving; retry")

    async def floor(self, tenant: int, conversation_id: bytes) -> tuple[int, dict[bytes, int]]:
        """HotHistory.floor: GET and ZRANGE in one MULTI."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("hot floor read"):
            async with self._t.core(keys.bucket).pipeline(transaction=True) as pipe:
                pipe.get(keys.floor())
                pipe.zrange(keys.archived_states(), 0, -1)
                raw, members = await pipe.execute()
        return int(raw or 0), pending_states(members)

    async def latest(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> tuple[int, Optional[int]]:
        """HotHistory.latest: floor + one ZREVRANGEBYSCORE LIMIT 1 per interval, one MULTI."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("history head"):
            async with self._t.core(keys.bucket).pipeline(transaction=True) as pipe:
                pipe.get(keys.floor())
                for lo, hi in descending_ranges(intervals, None):
                    pipe.execute_command("ZREVRANGEBYSCORE", keys.history(), _bound(hi), f"({lo}", "WITHSCORES",
                                         "LIMIT", 0, 1)
                got = await pipe.execute()
        floor = int(got[0] or 0)
        seqs = [s for part in got[1:] for _, s in int_score_pairs(part) if s > floor]
        return floor, (seqs[0] if seqs else None)

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[HotTail]:
        """HotHistory.tails: floors + heads + windows (MULTI), floors + records (MULTI),
        per core instance holding some of the conversations."""
        return await spread(self._t, queries, lambda q: self._of(tenant, q.conversation_id),
                            lambda client, part: _tails_on(client, tenant, part, window))

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """HotHistory.get: MessageStore.get (one GET; the version is the SHA-1 of the bytes)."""
        return await self._messages.get(tenant, conversation_id, message_id)

    async def resolve(self, tenant: int, records: Sequence[MessageRef], states: Sequence[MessageRef]
                      ) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int], list[int], list[bool]]:
        """HotHistory.resolve: one pipeline of GETs and EXISTS (per core instance)."""
        if not records and not states:
            return [], [], [], []

        async def reads(client, part: list[tuple[bool, MessageRef]]) -> list[tuple]:
            with boundary("message resolve"):
                async with client.pipeline(transaction=False) as pipe:
                    for is_record, (conv, mid) in part:
                        keys = CommitKeys(tenant, conv)
                        if is_record:  # the record and its state
                            pipe.get(keys.record(mid))
                            pipe.get(keys.state(mid))
                        else:  # the state and whether the record is still here
                            pipe.get(keys.state(mid))
                            pipe.exists(keys.record(mid))
                    got = await pipe.execute()
            return [(got[2 * i], got[2 * i + 1]) for i in range(len(part))]
        items = [(True, ref) for ref in records] + [(False, ref) for ref in states]
        got = await spread(self._t, items, lambda item: self._of(tenant, item[1][0]), reads)
        n = len(records)
        recs = [None if raw is None else parse_record(raw, "in MessageStore") for raw, _ in got[:n]]
        return (recs, [_state(st) for _, st in got[:n]], [_state(st) for st, _ in got[n:]],
                [bool(e) for _, e in got[n:]])

    async def states(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """HotHistory.states: one pipeline of GETs of the state keys (per core instance)."""
        async def gets(client, part: list[MessageRef]) -> list:
            with boundary("message state"):
                async with client.pipeline(transaction=False) as pipe:
                    for conv, mid in part:
                        pipe.get(CommitKeys(tenant, conv).state(mid))
                    return await pipe.execute()
        return [_state(s) for s in await spread(self._t, refs, lambda ref: self._of(tenant, ref[0]), gets)]

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """HotHistory.record_sizes: MessageStore.record_sizes (one STRLEN per record, one pipeline)."""
        return await self._messages.record_sizes(tenant, refs)


async def _tails_on(client, tenant: int, queries: Sequence[TailQuery], window: int) -> list[HotTail]:
    """HotHistory.tails over the conversations of one core instance."""
    plans = [(q, CommitKeys(tenant, q.conversation_id), descending_ranges(q.intervals, None)) for q in queries]
    floor_keys = [k.floor() for _, k, _ in plans]
    with boundary("session heads"):
        for _ in range(HOT_READ_ATTEMPTS):
            async with client.pipeline(transaction=True) as pipe:
                for k in floor_keys:
                    pipe.get(k)
                for _, keys, _ in plans:
                    pipe.zrange(keys.archived_states(), 0, -1)
                for q, keys, ranges in plans:
                    for lo, hi in ranges:
                        pipe.execute_command("ZREVRANGEBYSCORE", keys.history(), _bound(hi), f"({lo}",
                                             "WITHSCORES", "LIMIT", 0, 1)
                    for lo, hi in ranges:
                        pipe.execute_command("ZREVRANGEBYSCORE", keys.history(), _bound(hi),
                                             f"({max(lo, q.base)}", "WITHSCORES", "LIMIT", 0, window + 1)
                res = await pipe.execute()
            floors = [int(v or 0) for v in res[:len(plans)]]
            pendings = [pending_states(m) for m in res[len(plans):2 * len(plans)]]
            at = 2 * len(plans)
            found = []
            for (_, _, ranges), floor in zip(plans, floors):
                n = len(ranges)
                heads = [p for part in res[at:at + n] for p in int_score_pairs(part) if p[1] > floor]
                rows = [p for part in res[at + n:at + 2 * n] for p in int_score_pairs(part) if p[1] > floor]
                found.append((heads[0] if heads else None, rows[:window + 1]))
                at += 2 * n
            wanted: dict[tuple[bytes, bytes], tuple[CommitKeys, int]] = {}
            for (q, keys, _), (head, rows) in zip(plans, found):
                for mid, seq in ([head] if head else []) + rows:
                    wanted.setdefault((q.conversation_id, mid), (keys, seq))
            raws = await _records(client, floor_keys, floors, [(k, mid) for (_, mid), (k, _) in wanted.items()])
            if raws is None:
                continue
            recs = {key: _checked(raw, key[0], key[1], seq) for (key, (_, seq)), raw in zip(wanted.items(), raws)}
            return [HotTail(floor, recs[(q.conversation_id, head[0])] if head else None,
                            [recs[(q.conversation_id, m)] for m, _ in rows], pending)
                    for (q, _, _), floor, (head, rows), pending in zip(plans, floors, found, pendings)]
    raise StoreUnavailable("session heads: the hot floor kept moving; retry")
