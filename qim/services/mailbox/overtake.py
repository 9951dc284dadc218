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

One call per overtake: the Redis store's fused script with the records ahead left
unfinished. So that a direct record is read at all while a backlog waits, a shard that
may overtake reads ahead of its FIFO's usual bound (READ_AHEAD_RECORDS and _BYTES).
Only stores whose watermark holds 64 independent lanes can do this (the Redis
MailboxStore; the CQL frontier holds one value for all lanes: decisions/0102).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import itertools
import logging
from typing import Any, Callable, Optional, cast

from qim._core import ids, watermark
from qim.consts import CONVERSATION_KIND_DIRECT, MAILBOX_BATCH_RECORDS, MAILBOX_SHARD_FIFO, WM_FLAG_MATERIALIZED
from qim.errors import EngineError, MailboxDirty
from qim.services.mailbox.record import Materialized, Prepared, ShardCursor, outcomes, prepare
from qim.stores.mailboxes import FusedRecord, MailboxStore

logger = logging.getLogger(__name__)

# a record within the next batch waits for one fused call at most: only records behind it overtake
OVERTAKE_FROM = MAILBOX_BATCH_RECORDS
OVERTAKES_PER_TURN = 64  # direct records finished together in one turn (one fused call)
DIRECT = CONVERSATION_KIND_DIRECT  # the kind byte of a direct conversation (docs/design.md §3)
KIND_AT = 49  # its place in a dispatch record: version, tenant, dispatch_id, message_id (qim/wire/dispatch.py)
# how far a shard that may overtake reads ahead before its partition is paused (memory
# bound: 64 shards x 2 MiB); without overtakes MAILBOX_SHARD_FIFO records, as before
READ_AHEAD_RECORDS = 8 * MAILBOX_SHARD_FIFO
READ_AHEAD_BYTES = 2 << 20
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


def queued(state: Any, msg: Any) -> bool:
    """Account for `msg` appended to shard `state`'s FIFO: its bytes, and its offset in
    `state.directs` when its conversation is direct (the kind byte: no decode here).
    Returns whether it is a direct conversation's record."""
    value = msg.value()
    if value is None:
        return False
    state.bytes += len(value)
    if len(value) > KIND_AT and value[KIND_AT] == DIRECT:
        state.directs.append(msg.offset())
        return True
    return False


def taken(state: Any, msg: Any, head: bool = True) -> None:
    """Account for `msg` leaving shard `state`'s FIFO: its bytes, and with `head` (the
    in-order path pops the FIFO's head) every direct offset up to it leaves
    `state.directs`, which must hold queued direct records only (the gate's urgency,
    decision 0148). An overtaken record (`head` False) left `directs` before."""
    value = msg.value()
    state.bytes -= len(value) if value is not None else 0
    if head:
        while state.directs and state.directs[0] <= msg.offset():
            state.directs.popleft()


def full(state: Any, deep: bool) -> bool:
    """Whether the shard's partition must pause: its FIFO's usual bound, or with `deep`
    (overtakes on) READ_AHEAD_RECORDS or READ_AHEAD_BYTES."""
    if not deep:
        return len(state.queue) >= MAILBOX_SHARD_FIFO
    return len(state.queue) >= READ_AHEAD_RECORDS or state.bytes >= READ_AHEAD_BYTES


def drained(state: Any, deep: bool) -> bool:
    """Whether a paused partition may resume (half of the bound `full` applies)."""
    if not deep:
        return len(state.queue) < MAILBOX_SHARD_FIFO // 2
    return len(state.queue) < READ_AHEAD_RECORDS // 2 and state.bytes < READ_AHEAD_BYTES // 2


def _index(queue: Any, offset: int) -> Optional[int]:
    """Where the record at `offset` is in `queue` (offset order), None when gone."""
    i = bisect.bisect_left(_Offsets(queue), offset)
    return i if i < len(queue) and queue[i].offset() == offset else None


class _Offsets:
    """The offsets of a FIFO of Kafka messages, as a sequence for bisect."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def __len__(self) -> int:
        return len(self.queue)

    def __getitem__(self, i: int) -> int:
        return self.queue[i].offset()


def targets(state: Any) -> list[int]:
    """Indexes (ascending, at most OVERTAKES_PER_TURN) in shard `state`'s FIFO of the
    direct records at OVERTAKE_FROM or later; forgets those gone (those within the next
    batch stay: they leave with it, `taken`)."""
    found: list[int] = []
    for offset in list(state.directs):
        i = _index(state.queue, offset)
        if i is None:
            state.directs.remove(offset)
            continue
        if i < OVERTAKE_FROM:
            continue
        found.append(i)
        if len(found) == OVERTAKES_PER_TURN:
            break
    return found


@functools.lru_cache(maxsize=1 << 12)
def lane_index(tenant: int, recipients: tuple) -> dict[int, tuple[int, ...]]:
    """lane -> the indexes in `recipients` (a record's, ascending) of that lane's users.
    Cached by the whole tuple: a group's share of a shard repeats record after record, so
    a backlog of its records costs one hash each here, not a lane per member (the
    overtake's largest cost in the group step's profile, docs/perf.md "Round thirteen")."""
    out: dict[int, list[int]] = {}
    for i, user in enumerate(recipients):
        out.setdefault(lane_of(tenant, user), []).append(i)
    return {lane: tuple(ix) for lane, ix in out.items()}


async def overtake(store: MailboxStore, cur: ShardCursor, ahead: list[tuple[int, bytes]],
                   chosen: list[tuple[int, bytes]], memo: dict[int, Prepared]) -> Optional[list[Materialized]]:
    """Finish the records `chosen` [(offset, value)], direct ones, before the other
    records `ahead` (every queued record below the last chosen one that is not chosen;
    both in offset order): the entries of the chosen records' lanes L in the records
    ahead are begun and appended unfinished, the chosen records appended and finished,
    W advanced to the last chosen offset in L only, in one fused call. Returns their
    Materialized (cur.stored_blob is then the new W), or None when they may not overtake
    (a dispatch_id twice among them: the in-order path decides which offset comes
    first, or a record that does not decode: the in-order path stops the shard on it).
    `memo`: offset -> Prepared, filled here and reused by the in-order batch. A store
    failure is retried with backoff by repeating the call (it recognises its own earlier
    write). MailboxDirty / NotOwner as materialize()."""
    try:
        ts = [prepare(cur, offset, value) for offset, value in chosen]
        lanes = {lane_of(t.d.tenant, u) for t in ts for u in t.d.recipients}
        parts: list[FusedRecord] = []
        done_now: list[tuple[Prepared, set]] = []
        for offset, value in ahead:
            p = memo.get(offset) or memo.setdefault(offset, prepare(cur, offset, value))
            index = p.lane_index
            if index is None:
                index = p.lane_index = lane_index(p.d.tenant, p.d.recipients)
            done = p.lanes_done
            new = {lane for lane in lanes if lane in index and (done is None or lane not in done)}
            if new:  # a (record, lane) is appended by one overtake only: its entries are durable then
                members = p.fused.members  # (user, entry) in recipients' order (record.entries)
                parts.append(p.fused._replace(members=sorted(members[i] for lane in new for i in index[lane]),
                                              inline=False))
                done_now.append((p, new))
    except MailboxDirty:
        return None
    records = [*parts, *(t.fused for t in ts)]
    if len({r.dispatch_id for r in records}) != len(records):
        return None
    new_blob = advance_lanes(cur.blob, lanes, ts[-1].fused.offset)
    delay = 0.2
    prevs: dict = {}
    while True:
        try:  # the Redis store's fused call (overtakes run only on it: decisions/0142)
            prevs.clear()
            results = await cast(Any, store).fused(cur.shard, cur.epoch, records, cur.stored_blob, new_blob,
                                                    writer=cur.writer, fence=cur.owner_epoch, unfinished=len(parts),
                                                    prevs=prevs)
            break
        except EngineError as exc:
            logger.warning("shard %d offsets %s (overtaking): %s; retrying", cur.shard, [o for o, _ in chosen], exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
    cur.stored_blob = new_blob
    for p, new in done_now:
        p.lanes_done = new | (p.lanes_done or set())
    # the chosen records' outcomes as materialize() makes them (decisions/0075, 0156): their
    # previous positions were read after the records ahead got their entries of lanes L
    return outcomes(cur, ts, results[len(parts):], new_blob,
                    {(i - len(parts), user): prev for (i, user), prev in prevs.items()})


async def turn(store: MailboxStore, state: Any, push: Callable[[Materialized], None]) -> int:
    """One worker turn's overtake in shard `state` (a ShardState: its FIFO of Kafka
    messages, `directs`, `prepared` memo, cursor): the direct records found by `targets`
    finish now, together, and leave the FIFO; `push(materialized)` is called for each.
    Returns how many overtook. Errors as `overtake`."""
    queue = state.queue
    if not state.directs or len(queue) <= OVERTAKE_FROM:
        return 0
    head = queue[0].offset()
    if state.prepared and min(state.prepared) < head:  # left by a record that overtook, or stale
        state.prepared = {o: p for o, p in state.prepared.items() if o >= head}
    found = targets(state)
    if not found:
        return 0
    chosen = set(found)
    msgs = [queue[i] for i in found]
    ahead = [(m.offset(), m.value()) for i, m in enumerate(itertools.islice(queue, 0, found[-1])) if i not in chosen]
    for m in msgs:
        state.directs.remove(m.offset())  # overtaken now, or left to the in-order path
    done = await overtake(store, state, ahead, [(m.offset(), m.value()) for m in msgs], state.prepared)
    if done is None:
        return 0
    for i in reversed(found):
        del queue[i]
    for m, one in zip(msgs, done):
        taken(state, m, head=False)
        push(one)
    return len(done)
