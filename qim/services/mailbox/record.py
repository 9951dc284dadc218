"""Materialization of dispatch records (docs/design.md §5.4, seed 004 §5).

Deterministic: every input comes from the record and its log offset (no wall clock, no
random ids). The records a shard worker has queued take the fused script together, one
round trip for all their recipients (docs/decisions/0061-one-round-trip-per-group-record.md,
0067-a-shard-backlog-in-one-call.md); with a fault point armed one record at a time takes
begin_dispatch → append → finish_dispatch, so the point can fall between them.
A DUPLICATE (same dispatch_id and digest already finished at another offset) appends
nothing, reuses the first mailbox_seq and still advances W to this offset. A RESUME
(begun, never finished) appends again with the first mailbox_seq (idempotent) and finishes.

Repeatable after any store failure, whether or not the failed call applied: begin and
append are idempotent, and finish recognises a W this very writer already wrote for
this record (RECOVERED: its reply was lost) while still refusing any other writer's W
(docs/decisions/0024-mailbox-finish-recognises-its-own-write.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from qim._core import eventgroup, ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MailboxEvent
from qim.consts import MAILBOX_BATCH_BYTES, MAILBOX_BATCH_RECORDS
from qim.errors import MailboxDirty
from qim.faults import FaultPoints
from qim.services.mailbox.inline import Inline, inlinable, inline_entries
from qim.stores.mailboxes import DUPLICATE, FRESH, RECOVERED, FusedRecord, MailboxStore, day_of
from qim.wire import dispatch as dispatch_record


@dataclass
class ShardCursor:
    """What one shard worker knows of its shard: epoch, the watermark it last wrote, its
    writer token (stored beside W; empty: a retry never recognises its own write) and the
    owner_epoch the ShardRegistry granted (the fence every write carries; 0 without a
    registry: docs/decisions/0040-scale-leases-and-fencing.md)."""

    shard: int
    epoch: int
    stored_blob: Optional[bytes]  # None until the first record is materialized
    writer: bytes = b""
    owner_epoch: int = 0

    @property
    def blob(self) -> bytes:
        """The watermark blob to advance from (the empty blob before the first record)."""
        return self.stored_blob if self.stored_blob is not None else watermark.empty()


@dataclass
class Materialized:
    """The outcome of one record: status, tenant, the mailbox_seq used, its recipients and
    their event (push and projection need only its message's coordinates), the new W;
    `inline`: what its push carries whole, per recipient user (inline.py, decisions/0156)."""
    status: str  # FRESH | RESUME | DUPLICATE | RECOVERED (this writer finished it before; reply lost)
    tenant: int
    mailbox_seq: int
    recipients: tuple  # user ids, ascending
    event: MailboxEvent  # the recipients' event but for its event_id (and the sender's cmid)
    new_blob: bytes
    trace_id: bytes = b""  # the message's (dispatch version 2), for log lines and pushes
    inline: Inline = field(default_factory=dict)


def build_events(d: dispatch_record.Dispatch) -> list[tuple[int, list[MailboxEvent]]]:
    """One event per recipient (MESSAGE, or the CONTROL kind: MEMBERSHIP / RECALL / DELETE);
    only the sender's own entry carries the cmid. The definition `entries` packs."""
    out = []
    for user in d.recipients:
        out.append((user, [MailboxEvent.at(
            d.event_type, ids.event_id(d.dispatch_id, user, d.event_type), d.coord,
            d.client_message_id if user == d.coord.sender_id else b"", d.body)]))
    return out


def entries(d: dispatch_record.Dispatch, seq8: bytes) -> tuple[MailboxEvent, list[tuple[int, bytes]]]:
    """(the recipients' event, [(user, seq8 ‖ its event group)]) of `d`: build_events
    packed, the recipients' entries copied from one packed event with each one's
    event_id written in (eventgroup.pack_each: no event object per recipient,
    decisions/0070); the sender's own entry, which carries the cmid, packed alone."""
    eids = [ids.event_id(d.dispatch_id, user, d.event_type) for user in d.recipients]
    event = MailboxEvent.at(d.event_type, eids[0], d.coord, b"", d.body)
    packed = eventgroup.pack_each(seq8, event, eids)
    sender = d.coord.sender_id
    if d.client_message_id and sender in d.recipients:
        i = d.recipients.index(sender)
        own = MailboxEvent.at(d.event_type, eids[i], d.coord, d.client_message_id, d.body)
        packed[i] = seq8 + eventgroup.pack_group([own])
    return event, list(zip(d.recipients, packed))


def batch_of(queue: Sequence, one: bool) -> list:
    """The queued records (Kafka messages) materialized together (decisions/0067): the
    head of the FIFO and the records after it, at most MAILBOX_BATCH_RECORDS and
    MAILBOX_BATCH_BYTES of record values; the head alone when `one` (a fault point is
    armed: the step-wise path). Never waits for more: an idle shard's record goes alone."""
    if one:
        return [queue[0]]
    batch: list = []
    size = 0
    for msg in queue:
        value = msg.value()
        size += len(value) if value is not None else 0  # a null record fails in materialize (dirty)
        if batch and (len(batch) == MAILBOX_BATCH_RECORDS or size > MAILBOX_BATCH_BYTES):
            break
        batch.append(msg)
    return batch


@dataclass
class Prepared:
    """A decoded record ready for the store: the dispatch, its fused-call form and events."""
    d: dispatch_record.Dispatch
    fused: FusedRecord
    event: MailboxEvent
    lane_index: Optional[dict] = None  # lane -> indexes of its recipients, once an overtake needed it (0142)
    lanes_done: Optional[set] = None  # lanes whose entries an overtake appended already (0142)


def prepare(cur: ShardCursor, offset: int, value: bytes) -> Prepared:
    """Decode and check the record at `offset` (MailboxDirty when it is undecodable or not
    this shard's) and build its entries with this offset's mailbox_seq."""
    try:
        d = dispatch_record.decode(value)
    except dispatch_record.DispatchDecodeError as exc:
        raise MailboxDirty(f"offset {offset}: undecodable dispatch: {exc}") from None
    if d.target_shard != cur.shard:
        raise MailboxDirty(f"offset {offset}: dispatch for shard {d.target_shard} found in partition {cur.shard}")
    seq8 = mseq.to_bytes(mseq.compose(cur.epoch, offset))
    event, members = entries(d, seq8)
    fused = FusedRecord(d.tenant, d.dispatch_id, dispatch_record.payload_digest(value), offset, seq8,
                        day_of(d.coord.created_at_ms), members, inlinable(d))
    return Prepared(d, fused, event)


async def materialize(store: MailboxStore, cur: ShardCursor, records: Sequence[tuple[int, bytes]],
                      faults: FaultPoints, through: Optional[int] = None,
                      memo: Optional[dict[int, Prepared]] = None) -> list[Materialized]:
    """Materialize consecutive records [(offset, value)] of the cursor's shard, in offset
    order, as one fused call (one record while a fault point is armed takes the
    step-wise path). One Materialized per record, each with the watermark after the
    last. Raises MailboxDirty (stop the shard; nothing written when a record does not
    decode or W moved), NotOwner (a newer owner fenced the shard: stop serving it) or
    StoreUnavailable, an EngineError (call again with the same cursor and records:
    whatever applied, the repeat completes them or recognises that this writer did).
    `through` (>= the last record's offset): W advances to it when the offsets after the
    last record up to it were finished already (records that overtook: decision 0142).
    `memo`: offset -> Prepared of this cursor's records prepared before (taken out)."""
    memo = {} if memo is None else memo
    prepared = [memo.pop(offset) if offset in memo else prepare(cur, offset, value) for offset, value in records]
    new_blob = watermark.advance_all(cur.blob, max(records[-1][0], -1 if through is None else through))
    if faults.active and len(prepared) == 1:  # step by step, so a fault point can stop it between the steps
        results = [await _stepwise(store, cur, prepared[0].fused, new_blob, faults)]
    else:  # one round trip, whatever the number of records and recipients (a batch formed
        # before a point was armed is repeated as it was formed)
        prevs: dict = {}
        results = await store.fused(cur.shard, cur.epoch, [p.fused for p in prepared], cur.stored_blob, new_blob,
                                    writer=cur.writer, fence=cur.owner_epoch, prevs=prevs)
        return outcomes(cur, prepared, results, new_blob, prevs)
    return outcomes(cur, prepared, results, new_blob, {})


def outcomes(cur: ShardCursor, prepared: Sequence[Prepared], results: Sequence[tuple[str, bytes]], new_blob: bytes,
             prevs: dict) -> list[Materialized]:
    """One Materialized per record of a store call (`results`: (status, mailbox_seq used)
    per record; `prevs`: (record index, user) -> previous entry offset, as the store's
    fused call fills it), with the inline part of each FRESH one (decisions/0156)."""
    per_record: dict[int, dict[int, int]] = {}
    for (i, user), prev in prevs.items():
        per_record.setdefault(i, {})[user] = prev
    out = []
    for i, (p, (status, used)) in enumerate(zip(prepared, results)):
        if status == RECOVERED and used != p.fused.seq8:
            status = DUPLICATE  # the dispatch was first materialized at an earlier offset: nothing new here
        # the first attempt's mailbox_seq may be of an earlier shard_epoch (begun before a
        # restore moved the shard on): pushed with its offset in this life, as pulls serve
        # it (docs/decisions/0075)
        seq = mseq.compose(cur.epoch, mseq.split(mseq.from_bytes(used))[1])
        # only FRESH: its entries were written by this very call at this offset, after
        # which the store read the previous positions (a RESUME's may have been written
        # by an earlier owner, a RECOVERED call's read was lost with its reply)
        mine = per_record.get(i) if status == FRESH else None
        out.append(Materialized(status, p.d.tenant, seq, p.d.recipients, p.event, new_blob, p.d.trace_id,
                                inline_entries(p.d, seq, cur.epoch, mine)))
    return out


async def _stepwise(store: MailboxStore, cur: ShardCursor, r: FusedRecord, new_blob: bytes,
                    faults: FaultPoints) -> tuple[str, bytes]:
    """begin → append → finish of one record, a fault point between append and finish."""
    status, used = await store.begin(cur.shard, r.dispatch_id, r.digest, r.offset, r.seq8, fence=cur.owner_epoch)
    if status != DUPLICATE:
        members = [(u, used + m[8:]) for u, m in r.members]
        await store.append(r.tenant, r.offset, r.day, members, shard=cur.shard, fence=cur.owner_epoch)
        faults.hit("after_append")
    if not await store.finish(cur.shard, cur.epoch, r.dispatch_id, cur.stored_blob, new_blob, writer=cur.writer,
                              fence=cur.owner_epoch):
        status = RECOVERED
    return status, used
