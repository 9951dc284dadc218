"""ArchiveStore and ConversationStateStore over CQL (docs/decisions/0023; qim/stores/archive.py).

Writes: plain INSERT/UPDATE with `USING TTL ? AND TIMESTAMP ?` (no LWT). The write time
of a message's cells is its created_at (in µs); a recall/delete writes state and an
empty body at the CONTROL message's created_at + 1 µs, so the later state wins whatever
order the rows arrive in, and writing any of them again changes nothing (same values,
same write time). Order within a batch: records and state changes, then the history
index and the archive bound (`max_seq`, write time = max_seq so the highest wins). The
index rows of one partition (conversation, bucket) go as UNLOGGED batches of at most
CQL_PARTITION_BATCH_ROWS rows and CQL_PARTITION_BATCH_BYTES of bodies: a busy
conversation's rows cost Cassandra one mutation per batch, not one request per row.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence

from qim.consts import (
    CQL_PARTITION_BATCH_BYTES,
    CQL_PARTITION_BATCH_ROWS,
    CQL_READ_CONCURRENCY,
    CQL_WRITE_CONCURRENCY,
)
from qim.proto.v1 import message_pb2
from qim.stores.archive import ArchivedRow, ArchiveRecord, ArchiveStateChange
from qim.stores.cql.codec import (
    RECORD_COLUMNS,
    bucket_of,
    buckets_between,
    complete,
    record_of,
    record_values,
    state_of,
    tenant_blob,
    u63,
)
from qim.stores.cql.session import CqlSession, partition_batch
from qim.stores.sessions import FirstSeen

_COLS = RECORD_COLUMNS.split(", ")
_MARKS = ", ".join("?" for _ in _COLS)


class CqlArchive:
    """ArchiveStore over CqlSession `session`."""

    def __init__(self, session: CqlSession) -> None:
        self._s = session
        ks = session.keyspace
        using = "USING TTL ? AND TIMESTAMP ?"
        self._cql = {
            "record": f"INSERT INTO {ks}.message_record (tenant, {RECORD_COLUMNS}) VALUES (?, {_MARKS}) {using}",
            "index": f"INSERT INTO {ks}.conversation_history (tenant, bucket, {RECORD_COLUMNS}) "
                     f"VALUES (?, ?, {_MARKS}) {using}",
            "bound": f"INSERT INTO {ks}.conversation_archive (tenant, conversation_id, max_seq) VALUES (?, ?, ?) "
                     "USING TIMESTAMP ?",
            "record_state": f"UPDATE {ks}.message_record {using} SET state = ?, body = ?, conversation_id = ?, "
                            "conversation_seq = ? WHERE tenant = ? AND message_id = ?",
            "index_state": f"UPDATE {ks}.conversation_history {using} SET state = ?, body = ?, message_id = ? "
                           "WHERE tenant = ? AND conversation_id = ? AND bucket = ? AND conversation_seq = ?",
            "record_edit": f"UPDATE {ks}.message_record {using} SET body = ?, version = ?, edited_at_ms = ?, "
                           "edit_controls = edit_controls + ?, conversation_id = ?, conversation_seq = ? WHERE tenant = ? AND message_id = ?",
            "index_edit": f"UPDATE {ks}.conversation_history {using} SET body = ?, version = ?, edited_at_ms = ?, "
                          "edit_controls = edit_controls + ?, message_id = ? WHERE tenant = ? AND conversation_id = ? AND bucket = ? AND conversation_seq = ?",
            "rows": f"SELECT {RECORD_COLUMNS} FROM {ks}.conversation_history WHERE tenant = ? AND conversation_id = ? "
                    "AND bucket = ? AND conversation_seq > ? AND conversation_seq <= ?",
            "by_id": f"SELECT {RECORD_COLUMNS} FROM {ks}.message_record WHERE tenant = ? AND message_id = ?",
            "at": f"SELECT {RECORD_COLUMNS} FROM {ks}.conversation_history WHERE tenant = ? AND conversation_id = ? "
                  "AND bucket = ? AND conversation_seq = ?",
        }

    async def _p(self, name: str):
        return await self._s.prepare(self._cql[name])

    async def write(self, tenant: int, records: Sequence[ArchiveRecord], changes: Sequence[ArchiveStateChange]) -> None:
        """ArchiveStore.write (see the module docstring for order and write times)."""
        t = tenant_blob(tenant)
        first: list = []
        second: list = []
        rec_stmt, idx_stmt = await self._p("record"), await self._p("index")
        bound_stmt = await self._p("bound")
        top: dict[bytes, int] = defaultdict(int)
        index: dict[tuple[bytes, int], list] = defaultdict(list)  # (conversation, bucket) -> [(size, call)]
        for item in records:
            rec = item.record
            values = record_values(rec)  # ValueError: a u64 with bit 63 set never reaches CQL
            ts = u63(rec.created_at_ms * 1000, "write time")
            first.append((rec_stmt, (t, *values, item.ttl_s, ts)))
            bucket = bucket_of(rec.conversation_seq)
            index[(rec.conversation_id, bucket)].append(
                (len(rec.body), (idx_stmt, (t, bucket, *values, item.ttl_s, ts))))
            top[rec.conversation_id] = max(top[rec.conversation_id], rec.conversation_seq)
        for rows in index.values():
            second.extend(_batched(rows))
        rs_stmt, is_stmt = await self._p("record_state"), await self._p("index_state")
        re_stmt, ie_stmt = await self._p("record_edit"), await self._p("index_edit")
        for ch in changes:
            ts = u63(ch.changed_at_ms * 1000 + 1, "write time")
            seq = u63(ch.conversation_seq, "conversation_seq")
            if ch.version:  # an edit (docs/decisions/0120): body, version and edit time, no state
                edited = u63(ch.edited_at_ms, "edited_at_ms")
                more = {ch.edit_control}
                first.append((re_stmt, (ch.ttl_s, ts, ch.body, ch.version, edited, more, ch.conversation_id, seq, t,
                                        ch.message_id)))
                first.append((ie_stmt, (ch.ttl_s, ts, ch.body, ch.version, edited, more, ch.message_id, t,
                                        ch.conversation_id, bucket_of(seq), seq)))
                continue
            first.append((rs_stmt, (ch.ttl_s, ts, int(ch.state), b"", ch.conversation_id, seq, t, ch.message_id)))
            first.append((is_stmt, (ch.ttl_s, ts, int(ch.state), b"", ch.message_id, t, ch.conversation_id,
                                    bucket_of(seq), seq)))
        for conv, seq in top.items():
            second.append((bound_stmt, (t, conv, seq, seq)))
        await self._s.execute_many(first, CQL_WRITE_CONCURRENCY, "archive records")
        await self._s.execute_many(second, CQL_WRITE_CONCURRENCY, "archive index")

    async def archived(self, tenant: int, conversation_id: bytes, lo: int, hi: int) -> dict[int, ArchivedRow]:
        """ArchiveStore.archived: the index rows of (lo, hi], one query per bucket."""
        t = tenant_blob(tenant)
        stmt = await self._p("rows")
        out: dict[int, ArchivedRow] = {}
        for b in buckets_between(lo, hi):
            for row in await self._s.execute(stmt, (t, conversation_id, b, lo, hi), "archive check"):
                out[row[0]] = ArchivedRow(row[1] or b"", state_of(row), complete(row))
        return out

    async def records(self, tenant: int, message_ids: Sequence[bytes]) -> list[Optional[message_pb2.MessageRecord]]:
        """ArchiveStore.records: point reads, concurrently."""
        t = tenant_blob(tenant)
        stmt = await self._p("by_id")
        found = await self._s.execute_all(stmt, [(t, mid) for mid in message_ids], CQL_READ_CONCURRENCY, "record read")
        return [record_of(rows[0], t, mid.hex()) if rows else None for mid, rows in zip(message_ids, found)]

    async def history_rows(self, tenant: int, conversation_id: bytes,
                           seqs: Sequence[int]) -> dict[int, Optional[message_pb2.MessageRecord]]:
        """ArchiveStore.history_rows: one point read per seq."""
        t = tenant_blob(tenant)
        stmt = await self._p("at")
        found = await self._s.execute_all(stmt, [(t, conversation_id, bucket_of(seq), seq) for seq in seqs],
                                          CQL_READ_CONCURRENCY, "index read")
        return {seq: record_of(rows[0], t, f"{conversation_id.hex()}/{seq}") if rows else None
                for seq, rows in zip(seqs, found)}


def _batched(rows: list) -> list:
    """The index writes of one partition ([(body bytes, (stmt, params))]) as calls for
    execute_many: a lone row as itself, more as UNLOGGED batches within the limits of
    the module doc."""
    out: list = []
    chunk: list = []
    size = 0
    for body, call in rows:
        if chunk and (len(chunk) >= CQL_PARTITION_BATCH_ROWS or size + body > CQL_PARTITION_BATCH_BYTES):
            out.append(chunk)
            chunk, size = [], 0
        chunk.append(call)
        size += body
    if chunk:
        out.append(chunk)
    return [c[0] if len(c) == 1 else (partition_batch(c), None) for c in out]


class CqlConversationState:
    """ConversationStateStore over CqlSession `session` (user_conversation_state)."""

    def __init__(self, session: CqlSession) -> None:
        self._s = session
        ks = session.keyspace
        self._insert = (f"INSERT INTO {ks}.user_conversation_state (tenant, user_id, conversation_id, kind, "
                        "peer_user_id, first_seen_at_ms) VALUES (?, ?, ?, ?, ?, ?)")
        # a row without a known peer never overwrites one with it
        self._insert_no_peer = (f"INSERT INTO {ks}.user_conversation_state (tenant, user_id, conversation_id, kind, "
                                "first_seen_at_ms) VALUES (?, ?, ?, ?, ?)")
        self._select = (f"SELECT conversation_id, kind, peer_user_id, first_seen_at_ms FROM "
                        f"{ks}.user_conversation_state WHERE tenant = ? AND user_id = ?")

    async def register(self, rows: Sequence[FirstSeen]) -> None:
        """ConversationStateStore.register: one INSERT per row, concurrently (the peer
        column only when known)."""
        with_peer, without = await self._s.prepare(self._insert), await self._s.prepare(self._insert_no_peer)
        calls = []
        for r in rows:
            key = (tenant_blob(r.tenant), u63(r.user, "user_id"), r.conversation_id, r.kind)
            seen = u63(r.first_seen_at_ms, "first_seen_at_ms")
            calls.append((with_peer, (*key, u63(r.peer, "peer_user_id"), seen)) if r.peer else (without, (*key, seen)))
        await self._s.execute_many(calls, CQL_WRITE_CONCURRENCY, "conversation state")

    async def conversations(self, tenant: int, user: int) -> list[FirstSeen]:
        """ConversationStateStore.conversations: one partition read."""
        stmt = await self._s.prepare(self._select)
        rows = await self._s.execute(stmt, (tenant_blob(tenant), u63(user, "user_id")), "conversation state")
        return [FirstSeen(tenant, user, conv, kind or 0, peer or 0, seen or 0) for conv, kind, peer, seen in rows]
