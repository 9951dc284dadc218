"""Outbox publishing of the MessageCommitter: RECORDED → OUTBOXED → COMMITTED
(docs/design.md §5.2; docs/decisions/0002, 0017).

`enqueue` calls the producer's produce() (the confluent-kafka enqueue, synchronous) and
returns a Pending whose delivery is awaited later by `complete`, so the caller can
release the conversation's turn right after the enqueue: produce() order is turn order
and the idempotent producer keeps it per partition. `resume` and `publish_older` load
commits that are not fresh (a retry of an in-flight send, CommitRecovery, a crashed
writer's reservations found by a reserve) and enqueue them in conversation_seq order.
A commit this process already enqueued is never produced twice by it: its Pending is
shared (`enqueued`). Every record of a conversation goes to one Outbox partition, its
commit bucket mod the partition count, so the Outbox keeps each conversation in
conversation_seq order however many partitions it has (docs/decisions/0041-scale-outbox-partitions.md). Commit state is read and written through the CommitStore only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional, Sequence

from qim._core import ids
from qim.consts import COMMIT_HELPER_TTL_MS, COMMIT_OP_HELPER_TTL_MS, MESSAGE_TYPE_CONTROL, OUTBOX_TOPIC
from qim.errors import EngineError, ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer
from qim.obs import otel
from qim.proto.v1 import message_pb2
from qim.services.writer.hlc import now_ms
from qim.services.writer.metrics import WriterMetrics
from qim.stores.commits import COMMITTED, RESERVED, CommitRef, CommitStore, LoadedCommit
from qim.stores.errors import StorageError
from qim.wire import outbox as outbox_codec

logger = logging.getLogger(__name__)


def ack(cmid: bytes, mid: bytes, conversation_id: bytes, cseq: int, created_at: int) -> message_pb2.SendAck:
    """The SendAck of a COMMITTED commit."""
    return message_pb2.SendAck(client_message_id=cmid, message_id=mid, conversation_id=conversation_id,
                               conversation_seq=cseq, created_at_ms=created_at)


class Pending:
    """A commit whose Outbox record is enqueued (`delivery` yields (partition, offset)),
    one found COMMITTED (`done`: nothing left to do), or one that could not be enqueued
    (`error`, raised by `complete`)."""

    __slots__ = ("ref", "ttl_ms", "delivery", "done", "error")

    def __init__(self, ref: CommitRef, ttl_ms: int = 0, delivery: Optional[asyncio.Future] = None,
                 done: Optional[message_pb2.SendAck] = None, error: Optional[RequestError] = None) -> None:
        self.ref, self.ttl_ms = ref, ttl_ms
        self.delivery, self.done, self.error = delivery, done, error


def helper_ttl(message_type: int) -> int:
    """How long the commit state outlives COMMITTED: CONTROL messages are group changes
    and recall/delete notices, whose retries must replay the original reply for as long
    as the SDK retries a pending operation."""
    return COMMIT_OP_HELPER_TTL_MS if message_type == MESSAGE_TYPE_CONTROL else COMMIT_HELPER_TTL_MS


class OutboxPublisher:
    """Produces Outbox records and marks commits COMMITTED. Errors: RequestError
    (UNAVAILABLE when the commit store or the broker fails: the commit stays resumable;
    INTERNAL when a recorded commit lost its record or audience)."""

    def __init__(self, commits: CommitStore, producer: AsyncProducer, faults: FaultPoints,
                 metrics: Optional[WriterMetrics] = None) -> None:
        self._m = metrics if metrics is not None else WriterMetrics()
        self._commits = commits
        self._producer = producer
        self._faults = faults
        self.enqueued: dict[CommitRef, Pending] = {}  # until completed
        self.partitions = 1  # of the Outbox topic: set from broker metadata at start
        # conversations (tenant, conversation_id) with a failed delivery since their last scan
        self.rescan: set[tuple[int, bytes]] = set()
        self._background: set[asyncio.Task] = set()

    def enqueue(self, ref: CommitRef, message_id: bytes, record: bytes, audience: bytes,
                message_type: int) -> Pending:
        """produce() one Outbox record now (qim/wire/outbox.py: audience ‖ field 1 record),
        stamped with the writer's clock as librdkafka would (the broker's LogAppendTime
        replaces it: docs/decisions/0032)."""
        try:
            # one conversation, one partition: its commit bucket decides (docs/decisions/0041)
            partition = ids.commit_bucket(ref.tenant, ref.conversation_id) % self.partitions
            delivery = self._producer.produce(OUTBOX_TOPIC, outbox_codec.encode(audience, record), key=message_id,
                                              partition=partition, timestamp_ms=now_ms(),
                                              headers=otel.outbox_headers(audience))  # None: untraced (0140)
        except EngineError as exc:
            self.rescan.add((ref.tenant, ref.conversation_id))
            raise RequestError(ErrorCode.UNAVAILABLE, "outbox unavailable") from exc
        pending = Pending(ref, helper_ttl(message_type), delivery)
        self.enqueued[ref] = pending
        return pending

    async def complete(self, pending: Pending) -> message_pb2.SendAck:
        """Await durable delivery, then mark COMMITTED (offset = OUTBOXED evidence)."""
        if pending.error is not None:
            raise pending.error
        if pending.done is not None:
            return pending.done
        ref = pending.ref
        if pending.delivery is None:  # a Pending is built with one of delivery, done, error
            raise RequestError(ErrorCode.INTERNAL, "outbox commit without a delivery")
        try:
            started = time.perf_counter()
            _, offset = await pending.delivery
            outboxed = time.perf_counter()
            self._m.stage.labels(stage="outbox").observe(outboxed - started)
            self._faults.hit("after_outbox")
            done = await self._commits.mark_committed(ref, offset, pending.ttl_ms)
            self._m.stage.labels(stage="commit").observe(time.perf_counter() - outboxed)
        except EngineError as exc:  # the broker, or StoreUnavailable
            self.rescan.add((ref.tenant, ref.conversation_id))  # the next reserve lists its unpublished commits
            raise RequestError(ErrorCode.UNAVAILABLE, "outbox or commit store unavailable") from exc
        except StorageError as exc:  # NotFound, NotRecorded: the commit state is not where it must be
            raise RequestError(ErrorCode.UNAVAILABLE, f"commit state: {exc.reason or exc.message}") from exc
        finally:
            if self.enqueued.get(ref) is pending:
                del self.enqueued[ref]
        self._faults.hit("after_commit")
        return ack(ref.client_message_id, done.message_id, ref.conversation_id, done.conversation_seq,
                   done.created_at_ms)

    async def resume(self, entries: Sequence[tuple[CommitRef, int]]) -> list[Pending]:
        """Enqueue the commits `entries` [(ref, conversation_seq)] in seq order, loading
        each from the commit store (a fixed number of round trips for all). Commits this
        process enqueued already share their Pending; COMMITTED ones come back done; one
        that cannot be enqueued comes back with its error (raised by `complete`), and the
        others are still enqueued. Call with the conversation's turn held."""
        entries = sorted(entries, key=lambda e: e[1])
        fresh = [ref for ref, _ in entries if ref not in self.enqueued]
        try:
            loaded = dict(zip(fresh, await self._commits.load(fresh))) if fresh else {}
        except StorageError as exc:
            error = RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable")
            error.__cause__ = exc
            return [self.enqueued.get(ref) or Pending(ref, error=error) for ref, _ in entries]
        out = []
        for ref, _ in entries:
            pending = self.enqueued.get(ref)
            if pending is None:
                try:
                    pending = await self._enqueue_loaded(ref, loaded[ref])
                except RequestError as exc:
                    pending = Pending(ref, error=exc)
            out.append(pending)
        return out

    def publish_older(self, older: Sequence[tuple[CommitRef, int]], own: Optional[CommitRef]) -> list[tuple[CommitRef, int]]:
        """The unpublished commits a reserve (or CommitRecovery) listed below its own that
        this process has not enqueued: a crashed or other writer's reservations."""
        return [(ref, seq) for ref, seq in older if ref != own and ref not in self.enqueued]

    def complete_in_background(self, pendings: Sequence[Pending]) -> None:
        """Finish older commits published on a newer one's behalf without making the newer
        send wait for them; a failure is counted and left to CommitRecovery (the commit
        stays in the in-flight set), never dropped."""
        for pending in pendings:
            task = asyncio.get_running_loop().create_task(self._complete_counted(pending))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _complete_counted(self, pending: Pending) -> None:
        try:
            await self.complete(pending)
            self._m.older_published.inc()
        except RequestError as exc:
            self._m.older_failed.inc()
            logger.warning("older commit not completed (CommitRecovery retries it): %s", exc.message)

    async def _enqueue_loaded(self, ref: CommitRef, loaded: Optional[LoadedCommit]) -> Pending:
        if loaded is None:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit state vanished; retry")
        record = loaded.record
        if loaded.state == RESERVED:  # split mode: the record step is still to do
            await self.record(ref, loaded.message_id)
        parsed = message_pb2.MessageRecord.FromString(record or b"")
        if loaded.state == COMMITTED:
            return Pending(ref, done=ack(parsed.client_message_id, loaded.message_id, parsed.conversation_id,
                                         loaded.conversation_seq, loaded.created_at_ms))
        if record is None or loaded.audience is None:
            raise RequestError(ErrorCode.INTERNAL, "recorded commit lost its record or audience")
        return self.enqueue(ref, loaded.message_id, record, loaded.audience, parsed.message_type)

    async def record(self, ref: CommitRef, message_id: bytes) -> None:
        """RESERVED → RECORDED (the second call of split mode, also used by resumption)."""
        started = time.perf_counter()
        try:
            await self._commits.record(ref, message_id)
        except StorageError as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        self._m.stage.labels(stage="record").observe(time.perf_counter() - started)
        self._faults.hit("after_record")
