"""Session list entries, computed on the read path from canonical history (DESIGN.md §6,
§7; seed 000 未读与已读 and "会话头不额外写第二份").

Visible part for a user: direct conversations everything; groups the union of the
user's member intervals lo < seq <= hi (lo = joined_at, hi = left_at, open while a
member; a re-joined member holds several, qim/services/writer/intervals.py), from the
group_members HASH. Head: the newest visible message of any type (a recalled or deleted
one without body). Unread, the single definition, never accumulated on the write path:
  |{m visible : base < m.seq ∧ m.sender_id ≠ self ∧ m.type ≠ CONTROL ∧ m.state = NORMAL}|
with base = max(read_conversation_seq, lo of the first interval); exact while
head.seq − base ≤ 200 (UNREAD_EXACT_WINDOW), else unread = 200 and unread_exact = false.
Never latest − read. The entry's joined_at / left_at report the latest interval.

Reads per page: three pipelined round trips whatever the page size: (1) read
positions, peers, group intervals and ids; (2) per conversation and visible interval the
head index entry and the index entries above the base (at most 201); (3) every record
needed. Any missing or corrupt input raises PageError: the page fails, never a silent zero.
"""

from __future__ import annotations

from typing import Iterable, Optional

from google.protobuf.message import DecodeError

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CONTROL, SESSION_HEAD_BODY_MAX, UNREAD_EXACT_WINDOW
from qim.infra.redis.client import int_score_pairs
from qim.proto.v1 import history_pb2, message_pb2, session_pb2
from qim.services.session.keys import peers_key, read_key
from qim.services.writer.history import history_item
from qim.services.writer.intervals import OPEN, Interval, descending_ranges, latest, parse_intervals
from qim.services.writer.keys import CommitKeys

NORMAL = message_pb2.MESSAGE_STATE_NORMAL


class PageError(Exception):
    """A record, index entry or interval needed by the page is missing or corrupt."""


def count_unread(records: Iterable[message_pb2.MessageRecord], user: int, base: int, hi: Optional[int]) -> int:
    """The unread definition over `records` (any order, any superset of the window)."""
    return sum(1 for r in records
               if r.conversation_seq > base and (hi is None or r.conversation_seq <= hi)
               and r.sender_id != user and r.message_type != MESSAGE_TYPE_CONTROL and r.state == NORMAL)


def head_item(rec: message_pb2.MessageRecord, user: int) -> history_pb2.HistoryItem:
    """History form of the head; its body only up to SESSION_HEAD_BODY_MAX, so a page of
    heads stays far below the 4 MiB frame limit (DESIGN.md §4)."""
    return history_item(rec, user, SESSION_HEAD_BODY_MAX)


def parse_member_intervals(raw: Optional[bytes], conv: bytes) -> tuple[Interval, ...]:
    """group_members value "<joined_at>:<left_at>[,...]" -> ((lo, hi | None), ...)."""
    if raw is None:
        raise PageError(f"member interval missing for group {conv.hex()}")
    try:
        return parse_intervals(raw)
    except ValueError:
        raise PageError(f"corrupt member interval for group {conv.hex()}") from None


class _Conv:
    __slots__ = ("conv", "kind", "keys", "read", "peer", "group_id", "intervals", "head", "window", "exact", "n_head")

    def __init__(self, conv: bytes, tenant: int) -> None:
        self.conv = conv
        self.kind = ids.conversation_kind(conv)
        self.keys = CommitKeys(tenant, conv)
        self.read = self.peer = self.group_id = self.n_head = 0
        self.intervals: tuple[Interval, ...] = OPEN
        self.head: Optional[tuple[bytes, int]] = None
        self.window: list[tuple[bytes, int]] = []
        self.exact = True

    @property
    def base(self) -> int:
        return max(self.read, self.intervals[0][0])


async def summarize(redis, tenant: int, user: int, convs: list[bytes]) -> dict[bytes, session_pb2.SessionEntry]:
    """SessionEntry per conversation of `convs` for `user`. Raises PageError (corrupt or
    missing data) and redis errors (the caller maps them to UNAVAILABLE)."""
    if not convs:
        return {}
    items = [_Conv(c, tenant) for c in convs]
    groups = [it for it in items if it.kind == CONVERSATION_KIND_GROUP]
    hexes = [c.hex() for c in convs]
    async with redis.pipeline(transaction=False) as pipe:  # (1)
        pipe.hmget(read_key(tenant, user), hexes)
        pipe.hmget(peers_key(tenant, user), hexes)
        for it in groups:
            pipe.hget(it.keys.group_members(), user)
            pipe.hget(it.keys.group_meta(), "gid")
        res = await pipe.execute()
    for it, read, peer in zip(items, res[0], res[1]):
        it.read, it.peer = int(read or 0), int(peer or 0)
    for i, it in enumerate(groups):
        it.intervals = parse_member_intervals(res[2 + 2 * i], it.conv)
        gid = res[3 + 2 * i]
        if gid is None:
            raise PageError(f"group meta missing for {it.conv.hex()}")
        it.group_id, it.peer = int(gid), 0
    async with redis.pipeline(transaction=False) as pipe:  # (2) raw replies, see int_score_pairs
        for it in items:
            heads = descending_ranges(it.intervals, None)
            it.n_head = len(heads)
            for lo, hi in heads:
                pipe.execute_command("ZREVRANGEBYSCORE", it.keys.history(), "+inf" if hi is None else hi, f"({lo}",
                                     "WITHSCORES", "LIMIT", 0, 1)
            for lo, hi in heads:
                pipe.execute_command("ZREVRANGEBYSCORE", it.keys.history(), "+inf" if hi is None else hi,
                                     f"({max(lo, it.base)}", "WITHSCORES", "LIMIT", 0, UNREAD_EXACT_WINDOW + 1)
        res = await pipe.execute()
    at = 0
    for it in items:
        head = next((pairs for pairs in map(int_score_pairs, res[at:at + it.n_head]) if pairs), None)
        if not head:
            raise PageError(f"no visible message in {it.conv.hex()}")
        it.head = head[0]
        it.exact = it.head[1] - it.base <= UNREAD_EXACT_WINDOW
        if it.exact:  # then the window holds every visible message above the base (at most 200)
            it.window = [p for part in res[at + it.n_head:at + 2 * it.n_head] for p in int_score_pairs(part)]
        at += 2 * it.n_head
    wanted = {}
    for it in items:
        for mid, seq in [it.head] + it.window:
            wanted.setdefault(mid, (it, seq))
    async with redis.pipeline(transaction=False) as pipe:  # (3)
        for mid, (it, _) in wanted.items():
            pipe.get(it.keys.record(mid))
        res = await pipe.execute()
    records = {mid: _record(raw, it.conv, mid, seq) for (mid, (it, seq)), raw in zip(wanted.items(), res)}
    out = {}
    for it in items:
        head = records[it.head[0]]
        if it.exact:
            unread = count_unread((records[mid] for mid, _ in it.window), user, it.base, None)
        else:
            unread = UNREAD_EXACT_WINDOW
        out[it.conv] = session_pb2.SessionEntry(
            conversation_id=it.conv, kind=it.kind, last_message=head_item(head, user),
            last_activity_id=head.message_id, read_conversation_seq=it.read, unread=unread,
            unread_exact=it.exact, joined_at=latest(it.intervals)[0], left_at=latest(it.intervals)[1] or 0,
            peer_user_id=it.peer,
            group_id=it.group_id)
    return out


def _record(raw: Optional[bytes], conv: bytes, mid: bytes, seq: int) -> message_pb2.MessageRecord:
    """Parse and cross-check one record against its history index entry."""
    if raw is None:
        raise PageError(f"record missing at conversation_seq {seq} of {conv.hex()}")
    try:
        rec = message_pb2.MessageRecord.FromString(raw)
    except DecodeError:
        raise PageError(f"corrupt record at conversation_seq {seq} of {conv.hex()}") from None
    if rec.message_id != mid or rec.conversation_seq != seq or rec.conversation_id != conv:
        raise PageError(f"history index and record disagree at conversation_seq {seq} of {conv.hex()}")
    return rec
