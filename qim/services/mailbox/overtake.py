"""A direct record overtakes the group records queued before it in its shard's FIFO
(docs/decisions/0142-direct-records-overtake-group-records.md; issue 41).

The ordering rule kept (docs/design.md §3, §5.4-5.5): W[lane] says every record up to
it is materialized for the users of that lane, and a pull never goes past the lane's W.
A direct record at offset o whose recipients are in lanes L may therefore be finished
early, with W[l] = max(W[l], o) for l in L only, once every record queued before it
has its entries of lanes L appended: those entries are begun (DispatchProgress: their
mailbox_seq is fixed, a duplicate appends nothing) and appended, not finished. The
records stay in the FIFO and are materialized in offset order later (a RESUME: the same
mailbox_seq, idempotent appends, then finish); the other lanes' W never moves past
them. A user's entries stay in offset order and none appears below a W already
shown. A restart replays from min(W) + 1: the overtaken record is then a DUPLICATE
(nothing appended), the begun ones RESUME.

Only stores whose watermark holds 64 independent lanes can do this (the Redis
MailboxStore; the CQL frontier holds one value for all lanes: decisions/0102).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from typing import Any, Callable, Optional

from qim._core import ids, watermark
from qim._core import mailbox_seq as mseq
from qim.consts import MAILBOX_BATCH_RECORDS, WM_FLAG_MATERIALIZED
from qim.errors import EngineError, MailboxDirty
from qim.services.mailbox.record import Materialized, Prepared, ShardCursor, prepare
from qim.stores.mailboxes import DUPLICATE, RECOVERED, MailboxStore

logger = logging.getLogger(__name__)

# a record within the next batch waits for one fused call at most: only records behind it overtake
OVERTAKE_FROM = MAILBOX_BATCH_RECORDS
OVERTAKES_PER_TURN = 4  # bounds one worker turn: the head batch is never starved
DIRECT = 1  # conversation kind byte of a direct conversation (docs/design.md §3)
KIND_AT = 49  # its place in a dispatch record: version, tenant, dispatch_id, message_id (qim/wire/dispatch.py)
RETRY_MAX_S = 5.0


@functools.lru_cache(maxsize=1 << 16)
def lane_of(tenant: int, user: int) -> int:
    """The user's lane (BLAKE3, once per user: group members repeat record after record)."""
    return ids.lane_id(tenant, user)


def advance_lanes(blob: bytes, lanes: set[int], offset: int) -> bytes:
    """The watermark `blob` with W = max(W, offset) (and the materialized flag) in `lanes`
    only; the other lanes unchanged. WatermarkError on a corrupt blob."""
    out = []
    for i, (flags, w, floor) in enumerate(watermark.decode(blob)):
        if i in lanes:
            flags, w = flags | WM_FLAG_MATERIALIZED, max(w, offset)
        out.append((flags, w, floor))
    return watermark.encode(out)


def targets(queue: Any) -> list[int]:
    """Indexes (ascending, at most OVERTAKES_PER_TURN) of the records of `queue` (Kafka
    messages of one shard, offset order) at OVERTAKE_FROM or later whose conversation is
    direct, by the kind byte alone (no decode: `overtake` decodes, and leaves a record
    that does not decode to the in-order path)."""
    found: list[int] = []
    for i in range(OVERTAKE_FROM, len(queue)):
        value = queue[i].value()
        if value is not None and len(value) > KIND_AT and value[KIND_AT] == DIRECT:
            found.append(i)
            if len(found) == OVERTAKES_PER_TURN:
                break
    return found


async def overtake(store: MailboxStore, cur: ShardCursor, ahead: list[tuple[int, bytes]],
                   target: tuple[int, bytes], memo: dict[int, Prepared]) -> Optional[Materialized]:
    """Finish the record `target` (offset, value) before the records `ahead` of it
    (offset order; every record between W and the target): append their entries of
    the target's lanes (begun, not finished), then the target's own, then finish it
    with W advanced in its lanes only. Returns its Materialized (cur.stored_blob is
    then its new W), or None when it may not overtake (a dispatch_id twice among them:
    the in-order path decides which offset comes first, or a record that does not
    decode: the in-order path stops the shard on it). `memo`: offset -> Prepared,
    filled here and reused by the in-order batch. A store failure is retried with
    backoff by repeating the whole (begin and append are idempotent; finish recognises
    its own write). MailboxDirty / NotOwner as materialize()."""
    try:
        t = prepare(cur, *target)
        lanes = {lane_of(t.d.tenant, u) for u in t.d.recipients}
        parts: list[tuple[Prepared, list]] = []
        for offset, value in ahead:
            p = memo.get(offset) or memo.setdefault(offset, prepare(cur, offset, value))
            mine = [m for m in p.fused.members if lane_of(p.d.tenant, m[0]) in lanes]
            if mine:
                parts.append((p, mine))
    except MailboxDirty:
        return None
    if len({p.d.dispatch_id for p, _ in parts} | {t.d.dispatch_id}) != len(parts) + 1:
        return None
    new_blob = advance_lanes(cur.blob, lanes, t.fused.offset)
    delay = 0.2
    while True:
        try:
            done = await _apply(store, cur, parts, t, new_blob)
            break
        except EngineError as exc:
            logger.warning("shard %d offset %d (overtaking): %s; retrying", cur.shard, t.fused.offset, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
    cur.stored_blob = new_blob
    return done


async def turn(store: MailboxStore, state: Any, push: Callable[[Materialized], None]) -> int:
    """One worker turn's overtakes in shard `state` (a ShardState: its queue of Kafka
    messages, `decoded` memo, cursor): each direct record found by `targets` finishes
    now and leaves the FIFO; `push(materialized)` is called for each. Returns how many
    overtook. Errors as `overtake`."""
    queue = state.queue
    if len(queue) <= OVERTAKE_FROM:
        return 0
    head = queue[0].offset()
    if state.prepared and min(state.prepared) < head:  # taken over by a record that overtook, or stale
        state.prepared = {o: p for o, p in state.prepared.items() if o >= head}
    n = 0
    for i in targets(queue):
        i -= n  # the records overtaken before this one left the queue
        ahead = [(m.offset(), m.value()) for m in itertools.islice(queue, 0, i)]
        done = await overtake(store, state, ahead, (queue[i].offset(), queue[i].value()), state.prepared)
        if done is None:
            break
        del queue[i]
        n += 1
        push(done)
    return n


async def _apply(store: MailboxStore, cur: ShardCursor, parts: list[tuple[Prepared, list]], t: Prepared,
                 new_blob: bytes) -> Materialized:
    """One attempt: begin the records ahead (one DP key each: concurrent), append their
    lane entries, then begin, append and finish the target."""
    fence = cur.owner_epoch
    begun = await asyncio.gather(*(store.begin(cur.shard, p.fused.dispatch_id, p.fused.digest, p.fused.offset,
                                               p.fused.seq8, fence=fence) for p, _ in parts))
    await asyncio.gather(*(store.append(p.fused.tenant, p.fused.offset, p.fused.day,
                                        [(u, used + m[8:]) for u, m in mine], shard=cur.shard, fence=fence)
                           for (p, mine), (status, used) in zip(parts, begun) if status != DUPLICATE))
    r = t.fused
    status, used = await store.begin(cur.shard, r.dispatch_id, r.digest, r.offset, r.seq8, fence=fence)
    if status != DUPLICATE:
        await store.append(r.tenant, r.offset, r.day, [(u, used + m[8:]) for u, m in r.members],
                           shard=cur.shard, fence=fence)
    if not await store.finish(cur.shard, cur.epoch, r.dispatch_id, cur.stored_blob, new_blob, writer=cur.writer,
                              fence=fence):  # this writer's earlier attempt applied (its reply was lost)
        status = DUPLICATE if used != r.seq8 else RECOVERED
    # the first attempt's offset in this shard_epoch, as materialize() pushes it (decisions/0075)
    seq = mseq.compose(cur.epoch, mseq.split(mseq.from_bytes(used))[1])
    return Materialized(status, t.d.tenant, seq, t.d.recipients, t.event, new_blob, t.d.trace_id)
