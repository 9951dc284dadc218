"""Outbox publishing of the MessageCommitter: RECORDED → OUTBOXED → COMMITTED
(DESIGN.md §5.2; docs/decisions/0002, 0017).

`enqueue` calls the producer's produce() (the confluent-kafka enqueue, synchronous) and
returns a Pending whose delivery is awaited later by `complete`, so the caller can
release the conversation's turn right after the enqueue: produce() order is turn order
and the idempotent producer keeps it per partition. `resume` and `publish_older` load
commits that are not fresh (a retry of an in-flight send, CommitRecovery, a crashed
writer's reservations found by a reserve) and enqueue them in conversation_seq order.
A commit this process already enqueued is never produced twice by it: its Pending is
shared (`enqueued`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional, Sequence

from prometheus_client import Counter

from qim.consts import COMMIT_HELPER_TTL_MS, COMMIT_OP_HELPER_TTL_MS, MESSAGE_TYPE_CONTROL, OUTBOX_TOPIC
from qim.errors import EngineError, ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.redis.client import LuaScripts, ScriptError
from qim.proto.v1 import message_pb2
from qim.services.writer.hlc import now_ms
from qim.services.writer.keys import CommitKeys, record_key_for

logger = logging.getLogger(__name__)

OLDER_PUBLISHED = Counter("qim_writer_older_commits_published",
                          "Unpublished commits of another (crashed) writer published before a newer one")
OLDER_FAILED = Counter("qim_writer_older_commit_failures",
                       "Older commits whose publication failed (left to CommitRecovery)")


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def full_record(prefix: bytes, seq: int) -> bytes:
    """The stored record: the writer's bytes with field 4 (conversation_seq) appended, the
    same bytes reserve_and_record stores (docs/decisions/0002 §3)."""
    return prefix + b"\x20" + varint(seq)


def ack(cmid: bytes, mid: bytes, conversation_id: bytes, cseq: int, created_at: int) -> message_pb2.SendAck:
    """The SendAck of a COMMITTED commit."""
    return message_pb2.SendAck(client_message_id=cmid, message_id=mid, conversation_id=conversation_id,
                               conversation_seq=cseq, created_at_ms=created_at)


class Pending:
    """A commit whose Outbox record is enqueued (`delivery` yields (partition, offset)),
    one found COMMITTED (`done`: nothing left to do), or one that could not be enqueued
    (`error`, raised by `complete`)."""

    __slots__ = ("commit_key", "keys", "cmid", "ttl_ms", "delivery", "done", "error")

    def __init__(self, commit_key: str, keys: CommitKeys, cmid: bytes = b"", ttl_ms: int = 0,
                 delivery: Optional[asyncio.Future] = None, done: Optional[message_pb2.SendAck] = None,
                 error: Optional[RequestError] = None) -> None:
        self.commit_key, self.keys, self.cmid, self.ttl_ms = commit_key, keys, cmid, ttl_ms
        self.delivery, self.done, self.error = delivery, done, error


def helper_ttl(message_type: int) -> int:
    """How long the commit state outlives COMMITTED: CONTROL messages are group changes
    and recall/delete notices, whose retries must replay the original reply for as long
    as the SDK retries a pending operation."""
    return COMMIT_OP_HELPER_TTL_MS if message_type == MESSAGE_TYPE_CONTROL else COMMIT_HELPER_TTL_MS


class OutboxPublisher:
    """Produces Outbox records and marks commits COMMITTED. Errors: RequestError
    (UNAVAILABLE when Redis or the broker fails: the commit stays resumable; INTERNAL when
    a recorded commit lost its record or audience)."""

    def __init__(self, redis, scripts: LuaScripts, producer: AsyncProducer, faults: FaultPoints) -> None:
        self._redis = redis
        self._scripts = scripts
        self._producer = producer
        self._faults = faults
        self.enqueued: dict[str, Pending] = {}  # commit key -> Pending, until completed
        self.rescan: set[str] = set()  # conversations (hex) with a failed delivery since their last scan
        self._background: set[asyncio.Task] = set()

    def enqueue(self, commit_key: str, keys: CommitKeys, cmid: bytes, message_id: bytes, record: bytes,
                audience: bytes, message_type: int) -> Pending:
        """produce() one Outbox record now (OutboxRecord bytes = audience ‖ field 1 record)."""
        outbox = audience + b"\x0a" + varint(len(record)) + record
        try:
            delivery = self._producer.produce(OUTBOX_TOPIC, outbox, key=message_id, partition=0)
        except EngineError as exc:
            self.rescan.add(keys.conv_hex)
            raise RequestError(ErrorCode.UNAVAILABLE, "outbox unavailable") from exc
        pending = Pending(commit_key, keys, cmid, helper_ttl(message_type), delivery)
        self.enqueued[commit_key] = pending
        return pending

    async def complete(self, pending: Pending) -> message_pb2.SendAck:
        """Await durable delivery, then mark COMMITTED (offset = OUTBOXED evidence)."""
        if pending.error is not None:
            raise pending.error
        if pending.done is not None:
            return pending.done
        keys = pending.keys
        try:
            _, offset = await pending.delivery
            self._faults.hit("after_outbox")
            st, mid, cseq, cat = await self._scripts.call(
                "mark_committed", [pending.commit_key, keys.inflight(), keys.unpublished(), keys.unpublished_owners()],
                [offset, now_ms(), pending.ttl_ms])
        except EngineError as exc:
            self.rescan.add(keys.conv_hex)  # the next reserve lists this conversation's unpublished commits
            raise RequestError(ErrorCode.UNAVAILABLE, "outbox or commit store unavailable") from exc
        except ScriptError as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, f"commit state: {exc.reason}") from exc
        finally:
            if self.enqueued.get(pending.commit_key) is pending:
                del self.enqueued[pending.commit_key]
        self._faults.hit("after_commit")
        return ack(pending.cmid, mid, bytes.fromhex(keys.conv_hex), int(cseq), int(cat))

    async def resume(self, keys: CommitKeys, entries: Sequence[tuple[str, int]]) -> list[Pending]:
        """Enqueue the commits `entries` [(commit key, conversation_seq)] in seq order,
        loading each from Redis (two pipelined round trips for all). Commits this process
        enqueued already share their Pending; COMMITTED ones come back done; one that
        cannot be enqueued comes back with its error (raised by `complete`), and the
        others are still enqueued. Call with the conversation's turn held."""
        entries = sorted(entries, key=lambda e: e[1])
        fresh = [ck for ck, _ in entries if ck not in self.enqueued]
        try:
            loaded = await self._load(fresh) if fresh else {}
        except RequestError as exc:
            return [self.enqueued.get(ck) or Pending(ck, keys, error=exc) for ck, _ in entries]
        out = []
        for ck, _ in entries:
            pending = self.enqueued.get(ck)
            if pending is None:
                try:
                    pending = await self._enqueue_loaded(ck, keys, *loaded[ck])
                except RequestError as exc:
                    pending = Pending(ck, keys, error=exc)
            out.append(pending)
        return out

    def publish_older(self, keys: CommitKeys, older: Sequence[bytes], own_key: str) -> list[tuple[str, int]]:
        """The unpublished commits a reserve listed below its own ([key, seq, ...] flat)
        that this process has not enqueued: a crashed or other writer's reservations."""
        out = []
        for i in range(0, len(older), 2):
            ck = older[i].decode()
            if ck != own_key and ck not in self.enqueued:
                out.append((ck, int(older[i + 1])))
        return out

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
            OLDER_PUBLISHED.inc()
        except RequestError as exc:
            OLDER_FAILED.inc()
            logger.warning("older commit not completed (CommitRecovery retries it): %s", exc.message)

    async def _load(self, commit_keys: Sequence[str]) -> dict[str, tuple]:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for ck in commit_keys:
                    pipe.hmget(ck, "st", "mid", "aud", "cseq", "cat", "rec")
                fields = await pipe.execute()
            async with self._redis.pipeline(transaction=False) as pipe:
                for ck, f in zip(commit_keys, fields):
                    pipe.get(record_key_for(ck, f[1]) if f[1] else "qim:none")
                records = await pipe.execute()
        except Exception as exc:  # redis errors of any kind: the commits stay resumable
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        return {ck: (f, rec) for ck, f, rec in zip(commit_keys, fields, records)}

    async def _enqueue_loaded(self, ck: str, keys: CommitKeys, fields: list, record: Optional[bytes]) -> Pending:
        state, mid, audience, cseq, cat, reserved = fields
        if state is None:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit state vanished; retry")
        if state == b"RESERVED":  # split mode: the record step is still to do
            await self.record(ck, keys, mid)
            record = reserved
        parsed = message_pb2.MessageRecord.FromString(record or b"")
        if state == b"COMMITTED":
            return Pending(ck, keys, done=ack(parsed.client_message_id, mid, parsed.conversation_id, int(cseq), int(cat)))
        if record is None or audience is None:
            raise RequestError(ErrorCode.INTERNAL, "recorded commit lost its record or audience")
        return self.enqueue(ck, keys, parsed.client_message_id, mid, record, audience, parsed.message_type)

    async def record(self, commit_key: str, keys: CommitKeys, message_id: bytes) -> None:
        """RESERVED → RECORDED (the second call of split mode, also used by resumption)."""
        try:
            await self._scripts.call("record", [commit_key, keys.record(message_id), keys.history()], [now_ms()])
        except (EngineError, ScriptError) as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        self._faults.hit("after_record")
