"""PULL_HISTORY in the writer (issue 6; DESIGN.md §5 step 7, §7, §11 history page 512 KiB).

Pages the history index (ZSET, score = conversation_seq) in either direction from an
anchor, clipped to the actor's visible intervals (a re-joined member pages across the
gap between its memberships, seeing neither the gap nor anything outside), bounded by a limit and a byte budget
(the first item is always returned). Records come from MessageStore in one pipelined
read per page. A missing or corrupt record fails the page (INTERNAL), never a silent
gap. Gaps in conversation_seq are legal and cost nothing here: the index holds only
existing messages (docs/decisions/0005-groups-history.md).
"""

from __future__ import annotations

from typing import Optional

from google.protobuf.message import DecodeError

from qim.consts import HISTORY_PAGE_DEFAULT_LIMIT, HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_LIMIT
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import history_pb2, internal_pb2, message_pb2
from qim.services.writer.access import visible_interval
from qim.services.writer.intervals import ascending_ranges, descending_ranges
from qim.services.writer.keys import CommitKeys

ITEM_OVERHEAD = 96  # fixed fields of a HistoryItem on the wire, for the byte budget


def history_item(rec: message_pb2.MessageRecord, actor_user: int,
                 body_limit: Optional[int] = None) -> history_pb2.HistoryItem:
    """Wire form of a stored record: recalled/deleted records carry no body, and neither
    does a body above `body_limit` (session heads: body_included false, the client reads
    it from history). The actor's own messages carry their client_message_id."""
    included = rec.state == message_pb2.MESSAGE_STATE_NORMAL and (body_limit is None or len(rec.body) <= body_limit)
    return history_pb2.HistoryItem(
        message_id=rec.message_id, conversation_seq=rec.conversation_seq, sender_id=rec.sender_id,
        created_at_ms=rec.created_at_ms, message_type=rec.message_type, custom_type=rec.custom_type,
        body=rec.body if included else b"", body_included=included, state=rec.state,
        client_message_id=rec.client_message_id if rec.sender_id == actor_user else b"")


async def pull_history(redis, actor: internal_pb2.Actor, req: history_pb2.PullHistory) -> history_pb2.HistoryBatch:
    """One HISTORY_BATCH page. Raises RequestError (FORBIDDEN, INVALID_ARGUMENT, INTERNAL)."""
    tenant = int.from_bytes(actor.tenant_id, "big")
    vis = await visible_interval(redis, tenant, actor.user_id, req.conversation_id, req.peer_user_id)
    limit = min(req.limit or HISTORY_PAGE_DEFAULT_LIMIT, HISTORY_PAGE_MAX_LIMIT)
    max_bytes = min(req.max_bytes or HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_BYTES)
    keys = CommitKeys(tenant, req.conversation_id)
    # one range query per visible interval (at most MEMBER_INTERVALS_MAX), one round trip;
    # the gaps between intervals are never read, so a page spans them without leaking
    async with redis.pipeline(transaction=False) as pipe:
        if req.direction == history_pb2.NEWER:
            for lo, hi in ascending_ranges(vis.intervals, req.anchor_seq):
                pipe.zrangebyscore(keys.history(), f"({lo}", "+inf" if hi is None else hi,
                                   start=0, num=limit + 1, withscores=True)
        elif req.direction == history_pb2.OLDER:
            for lo, hi in descending_ranges(vis.intervals, req.anchor_seq - 1 if req.anchor_seq else None):
                pipe.zrevrangebyscore(keys.history(), "+inf" if hi is None else hi, f"({lo}",
                                      start=0, num=limit + 1, withscores=True)
        else:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "unknown history direction")
        parts = await pipe.execute() if len(pipe) else []
    rows = [row for part in parts for row in part][:limit + 1]
    page = rows[:limit]
    async with redis.pipeline(transaction=False) as pipe:
        for mid, _ in page:
            pipe.get(keys.record(mid))
        raws = await pipe.execute() if page else []
    batch = history_pb2.HistoryBatch(has_more=len(rows) > limit, next_anchor=req.anchor_seq)
    used = 0
    for (mid, seq), raw in zip(page, raws):
        if raw is None:
            raise RequestError(ErrorCode.INTERNAL, f"history record missing at conversation_seq {int(seq)}")
        try:
            rec = message_pb2.MessageRecord.FromString(raw)
        except DecodeError:
            raise RequestError(ErrorCode.INTERNAL, f"corrupt history record at conversation_seq {int(seq)}") from None
        if rec.message_id != mid or rec.conversation_seq != int(seq):
            raise RequestError(ErrorCode.INTERNAL, f"history index and record disagree at {int(seq)}")
        item = history_item(rec, actor.user_id)
        size = len(item.body) + len(item.custom_type) + ITEM_OVERHEAD
        if batch.items and used + size > max_bytes:
            batch.has_more = True
            break
        batch.items.append(item)
        used += size
        batch.next_anchor = rec.conversation_seq
    return batch
