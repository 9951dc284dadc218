"""How the durable session projection writes its batches (the DurableProjector's write
half, qim/services/session/consumer.py; its module doc has the checkpoint, tenure and
fence rules, unchanged here).

A batch is one `Pending` per session shard: the records of that shard read under one
tenure, its checkpoint to move from `expected` to `new`. `SessionStore.project` writes
them; per shard, the checkpoint moves only after every registration its records
produced ran.

One Redis instance unavailable must not stall the shards of the others (issue 35 §1;
docs/decisions/0097, Amendment). With shards on several instances the store writes what
it can and names the shards it could not write (ShardsUnavailable); any other
StoreUnavailable leaves every shard of the call unwritten. A shard not written is
**held**: its records stay in memory in order, later records of its partition are
kept after them (`later`, never written before them: the checkpoint never passes a
record not written), its partition is paused so the memory stays bounded, and it is
written again alone after a jittered backoff (0.2 s doubling to 5 s), exactly as
attempted (same offsets: a write whose reply was lost is recognised as its own). The
other shards go on batch after batch. Written at last, what was read meanwhile is
written next, then the checkpoint has passed everything held and the partition resumes. A registration written while the shard was held, then again, is
the same order-independent write (nothing registered twice changes a result).

A record whose registrations the low-latency path already wrote (remembered in
`_projected`, qim/services/session/projected.py) is not decoded nor written again: only
the checkpoint moves past it (docs/decisions/0167).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from qim.consts import DISPATCH_TOPIC
from qim.errors import EngineError
from qim.obs.logcontext import bind, tracer
from qim.services.session.projected import Projected
from qim.services.session.register import Message, Registration, kind_of, registrations
from qim.stores.errors import CheckpointConflict, NotOwner, ShardsUnavailable, StorageError
from qim.wire import dispatch as dispatch_record

logger = logging.getLogger("qim.services.session.consumer")

HOLD_FIRST_DELAY_S = 0.2
HOLD_MAX_DELAY_S = 5.0


@dataclass
class Pending:
    """Records of one session shard read but not yet written: read under `tenure` with
    fence `owner_epoch`, its checkpoint to move from `expected` to `new` (offsets of its
    dispatch partition); `count` records, `messages` theirs in log order. When held:
    `retry_at` (event-loop time, s) and the next backoff `delay` (s)."""

    tenure: str
    owner_epoch: int
    expected: int
    new: int
    messages: list[Message] = field(default_factory=list)
    count: int = 0
    retry_at: float = 0.0
    delay: float = HOLD_FIRST_DELAY_S
    later: Optional["Pending"] = None  # records read while held, written after these


class BatchWrites:
    """The write half of DurableProjector (module doc): `_batch(msgs)` reads a poll's
    records into Pending shards and writes them, then the held shards that are due."""

    _consumer: Any
    _sessions: Any
    _m: Any
    _binding: str
    _on_registered: Callable[[list[Registration]], None]
    _on_lost: Optional[Callable[[int, str], None]]
    next: dict[int, int]
    fences: dict[int, int]
    tenures: dict[int, str]
    held: dict[int, Pending]
    stopped: str
    _projected: Optional[Projected]  # records the low-latency path registered (decision 0167)

    # provided by DurableProjector (consumer.py)
    def _fail_closed(self, reason: str) -> None:
        raise NotImplementedError

    async def remove_shard(self, shard: int, reason: str) -> None:
        """Stop projecting `shard` (DurableProjector.remove_shard in consumer.py)."""
        raise NotImplementedError

    async def _batch(self, msgs: list) -> None:
        fresh: dict[int, Pending] = {}
        for m in msgs:
            part, off = m.partition(), m.offset()
            held = self.held.get(part)
            tail = (held.later or held) if held is not None else None
            if part not in self.next or off < (tail.new if tail is not None else self.next[part]):
                continue  # a shard given up, or a record read before
            msg: Optional[Message] = None
            if self._projected is not None and self._projected.take(part, off):
                self._m.durable_skipped.inc()  # written by the low-latency path: the checkpoint moves past it
            else:
                msg = self._message(part, off, m.value())
                if msg is None:
                    return  # failed closed
            pend: Optional[Pending]
            if held is not None:  # read after the hold: kept apart (a retry repeats its attempt exactly)
                if held.later is None:
                    held.later = Pending(held.tenure, held.owner_epoch, held.new, held.new)
                pend = held.later
            else:
                pend = fresh.get(part)
            if pend is None:
                pend = fresh[part] = Pending(self.tenures[part], self.fences[part], self.next[part], off + 1)
            if msg is not None:
                pend.messages.append(msg)
            pend.new, pend.count = off + 1, pend.count + 1
        if fresh:
            await self._write(fresh)
        now = asyncio.get_running_loop().time()
        due = {p: h for p, h in self.held.items() if h.retry_at <= now}
        if due and not self.stopped:  # apart: an instance still down delays only its own shards' retry
            await self._write(due)

    def _message(self, part: int, off: int, value: bytes) -> Optional[Message]:
        """The registration input of the record at `off` of partition `part`; None after
        failing the projection closed on a record that does not decode (never skipped:
        a gap here is a conversation missing from a list)."""
        try:
            d = dispatch_record.decode(value)
            c = d.coord
            if d.trace_id and tracer.isEnabledFor(logging.DEBUG):
                with bind(trace=d.trace_id):
                    tracer.debug("durable projection of partition %d offset %d", part, off)
            kind_of(c.conversation_id)
            return Message(d.tenant, c.conversation_id, c.conversation_seq, c.created_at_ms, c.sender_id,
                           d.recipients)
        except (dispatch_record.DispatchDecodeError, ValueError) as exc:
            self._fail_closed(f"partition {part} offset {off}: {exc}")
            return None

    async def _write(self, pending: dict[int, Pending]) -> None:
        """Write `pending` (one project call, again without a shard a refusal dropped);
        advance the shards written, hold the ones left unwritten by an outage."""
        batch: list[Registration] = []
        parts: set[int] = set()  # the shards `batch` was built from
        failed: set[int] = set()
        while True:
            # only the shards still in the tenure their records were read under: one given
            # up (and maybe taken again) while this batch ran is the new tenure's to project
            moves = {p: (w.owner_epoch, w.expected, w.new) for p, w in pending.items()
                     if self.tenures.get(p) == w.tenure}
            if not moves:
                return
            if set(moves) != parts:  # built once per batch, again only when a shard left it
                parts = set(moves)
                batch = registrations([m for p in moves for m in pending[p].messages], _everyone)
            try:
                # registrations then every checkpoint's fenced compare-and-set, one round
                # trip per instance; a retry after a lost reply finds its own values
                await self._sessions.project(self._binding, moves, batch,
                                             tenures={p: pending[p].tenure for p in moves})
                break
            except NotOwner as exc:
                shard = exc.shard if exc.shard is not None else min(moves)
                refused = pending.pop(shard)
                if self.tenures.get(shard) != refused.tenure:  # a write of an earlier tenure: dropped
                    self._m.stale_writes.inc()
                    logger.info("session shard %d: a checkpoint write of its previous tenure refused (%s)", shard,
                                exc.message)
                    continue
                # a newer owner fenced that shard: stop it (and what it held), keep the others
                logger.error("session shard %d: checkpoint write refused (%s); stopping the shard", shard,
                             exc.message)
                self._m.fenced.inc()
                await self._lose(shard, "refused by a newer owner's fence", "refused")
            except ShardsUnavailable as exc:  # the others were written (decision 0097, Amendment)
                failed = set(exc.shards) & set(moves)
                self._unavailable(exc, failed)
                break
            except EngineError as exc:  # StoreUnavailable: nothing of the call is known written
                failed = set(moves)
                self._unavailable(exc, failed)
                break
            except CheckpointConflict as exc:  # the checkpoint was rebound or moved under this tenure
                if self._on_lost is None:
                    return self._fail_closed(f"checkpoint: {exc.reason or 'refused'} {exc.message}")
                shard = _named_shard(exc.message, moves)
                pending.pop(shard, None)
                logger.error("session shard %d: %s %s; projecting it again from a fresh read", shard,
                             exc.reason, exc.message)
                self._m.shard_restarts.inc()
                await self._lose(shard, "checkpoint moved under its projection", "conflict")
            except StorageError as exc:  # a corrupt checkpoint: an operator decides
                return self._fail_closed(f"checkpoint: {exc.reason or 'refused'} {exc.message}")
        for p in failed:
            if self.tenures.get(p) == pending[p].tenure:
                await self._hold(p, pending[p])
        served = {p for p in moves if p not in failed and self.tenures.get(p) == pending[p].tenure}
        if not served:
            return
        for p in served:
            self.next[p] = pending[p].new
            if self.held.get(p) is pending[p]:
                later = pending[p].later
                if later is not None:  # next: what was read while held, due at once
                    self.held[p] = later
                else:
                    del self.held[p]
                    await self._release(p)
        done = batch if served == parts else registrations([m for p in served for m in pending[p].messages],
                                                            _everyone)
        self._m.dispatch_records.inc(sum(pending[p].count for p in served))
        self._m.registrations.labels(path="durable").inc(len(done))
        self._on_registered(done)

    def _unavailable(self, exc: EngineError, shards: set[int]) -> None:
        self._m.durable_retries.inc()
        logger.warning("durable projection: session shards %s not written (%s); held, retried alone",
                       sorted(shards), exc)

    async def _hold(self, shard: int, pend: Pending) -> None:
        """Keep `pend` (module doc) until a retry writes it: its partition paused, its
        retry after a jittered, doubling delay."""
        if self.held.get(shard) is not pend:
            self.held[shard] = pend
            try:  # bounds what is read meanwhile; records already fetched are appended in order
                await self._consumer.pause(DISPATCH_TOPIC, [shard])
            except EngineError as exc:
                logger.warning("session shard %d: partition not paused while held: %s", shard, exc)
        pend.retry_at = asyncio.get_running_loop().time() + pend.delay * random.uniform(0.5, 1.0)
        pend.delay = min(pend.delay * 2, HOLD_MAX_DELAY_S)

    async def _release(self, shard: int) -> None:
        """A held shard was written: fetch its partition again. If the broker refuses, the
        shard is handed back (`_lose`, "conflict") so the keeper takes it again from a
        fresh read, which assigns its partition unpaused; never left paused silently."""
        try:
            await self._consumer.resume(DISPATCH_TOPIC, [shard])
        except EngineError as exc:
            logger.error("session shard %d: partition not resumed (%s); taking the shard again", shard, exc)
            await self._lose(shard, "partition not resumed after a held write", "conflict")

    async def _lose(self, shard: int, why: str, reason: str) -> None:
        """Stop projecting `shard` and tell the keeper (`on_lost`), which stops its other
        parts and, for "conflict", takes it again from a fresh read."""
        await self.remove_shard(shard, why)
        if self._on_lost is not None:
            self._on_lost(shard, reason)


def _named_shard(message: str, moves: dict[int, tuple[int, int, int]]) -> int:
    """The shard a checkpoint refusal names ("shard=<s> ..." from session_project.lua),
    else the lowest shard of the call."""
    head = message.split(" ", 1)[0]
    if head.startswith("shard=") and head[6:].isdigit() and int(head[6:]) in moves:
        return int(head[6:])
    return min(moves)


def _everyone(user: int) -> bool:
    """Every recipient of a record on a served partition belongs to its shard."""
    return True
