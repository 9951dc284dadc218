"""MessageCommitter: ABSENT → RESERVED → RECORDED → OUTBOXED → COMMITTED → SEND_ACK
(DESIGN.md §5.2, seed 001 §2.3).

One Lua call reserves and records (idempotency, conversation_seq, frozen audience,
canonical MessageRecord, history index). The Outbox record is then published with
acks=all and awaited; its offset is the OUTBOXED evidence and is written by the same
Lua call that marks COMMITTED (one round trip fewer per message; the state is passed
through, see docs/decisions/0002-commit-keys.md). Only a COMMITTED result becomes a
SendAck. A retry of an in-flight send, and CommitRecovery for sends nobody retries,
resume through the same `_finish` path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Sequence

from qim.consts import (COMMIT_BUCKET_COUNT, COMMIT_HELPER_TTL_MS, CONVERSATION_KIND_GROUP, EVENT_GROUP_MAX_BYTES,
                        INLINE_BODY_BUDGET_BYTES, OUTBOX_TOPIC)
from qim.errors import EngineError, ErrorCode, RequestError
from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.redis.client import LuaScripts, ScriptError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.faults import FaultPoints
from qim.services.writer.hlc import HlcClock, now_ms
from qim.services.writer.keys import CommitKeys, inflight_key, record_key_for
from qim.services.writer.validate import check_send_shape, direct_audience, identity_digest, parse_send

logger = logging.getLogger(__name__)

# Bytes of a mailbox event besides its body (eventgroup layout, worst case) plus the
# group framing: an inline body must leave room for them inside one 8 KiB group.
EVENT_OVERHEAD_MAX = 256
RECOVERY_PERIOD_S = 1.0
# Script refusals that mean "plan again from fresh reads" (bounded by the caller).
REPLAN = frozenset({"QIM_MEMBERSHIP_CHANGED", "QIM_RECORD_CHANGED"})
SCRIPT_ERRORS = {"QIM_CONFLICT": ErrorCode.CONFLICT, "QIM_FORBIDDEN": ErrorCode.FORBIDDEN,
                 "QIM_NOT_FOUND": ErrorCode.NOT_FOUND}


class Replan(Exception):
    """The group membership or the target record moved between read and commit."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def inline_decision(recipient_count: int, body_len: int) -> bool:
    """Inline the body in mailbox entries when N × body ≤ 8 KiB and it fits one group."""
    return recipient_count * body_len <= INLINE_BODY_BUDGET_BYTES and body_len + EVENT_OVERHEAD_MAX <= EVENT_GROUP_MAX_BYTES


class MessageCommitter:
    """The only component allowed to produce a SendAck.

    `await commit(actor, raw_send)` -> message_pb2.SendAck. Raises RequestError:
    INVALID_ARGUMENT / PAYLOAD_TOO_LARGE / FORBIDDEN for bad input (before any sequence
    is consumed), CONFLICT for a reused cmid with other content, UNAVAILABLE when Redis,
    the broker or the HLC window is not available (the client retries with the same cmid).
    """

    def __init__(self, redis, scripts: LuaScripts, producer: AsyncProducer, clock: HlcClock,
                 shard_count: int, faults: FaultPoints, recovery_stale_ms: int) -> None:
        self._redis = redis
        self._scripts = scripts
        self._producer = producer
        self._clock = clock
        self._shard_count = shard_count
        self._faults = faults
        self._stale_ms = recovery_stale_ms
        self.group_sender = None  # set by the writer: GroupSends.send (groups.py)

    def new_record(self, actor: internal_pb2.Actor, conversation_id: bytes, cmid: bytes, message_type: int,
                   custom_type: bytes, body: bytes) -> message_pb2.MessageRecord:
        """A canonical record with a fresh HLC message_id (UNAVAILABLE without a window)."""
        message_id, created_at = self._clock.next_id()
        return message_pb2.MessageRecord(
            tenant_id=actor.tenant_id, message_id=message_id, conversation_id=conversation_id,
            sender_id=actor.user_id, sender_device_id=actor.device_id, client_message_id=cmid,
            message_type=message_type, custom_type=custom_type, body=body, created_at_ms=created_at)

    def audience(self, **fields) -> internal_pb2.OutboxRecord:
        return internal_pb2.OutboxRecord(shard_count=self._shard_count, **fields)

    async def run_commit(self, script: str, keys: CommitKeys, sender_id: int, digest: bytes,
                         record: message_pb2.MessageRecord, audience: internal_pb2.OutboxRecord,
                         extra_keys: Sequence[str] = (), extra_args: Sequence = ()) -> message_pb2.SendAck:
        """Reserve + record with `script` (same leading KEYS/ARGV as reserve_and_record),
        then publish and mark COMMITTED. Raises RequestError (CONFLICT, FORBIDDEN,
        NOT_FOUND, UNAVAILABLE) or Replan when the group or target record moved."""
        commit_key = keys.commit(sender_id, record.client_message_id)
        try:
            status, state, mid, cseq, cat = await self._scripts.call(
                script,
                [commit_key, keys.seq(), keys.record(record.message_id), keys.history(), keys.inflight(), *extra_keys],
                [digest, record.message_id, record.created_at_ms, record.SerializeToString(),
                 audience.SerializeToString(), now_ms(), "1" if self._faults.active else "0", *extra_args],
            )
        except ScriptError as exc:
            if exc.reason in REPLAN:
                raise Replan(exc.reason) from None
            code = SCRIPT_ERRORS.get(exc.reason, ErrorCode.INTERNAL)
            raise RequestError(code, str(exc).split(" script:")[0].split(" ", 1)[-1]) from None
        except EngineError as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        if state == b"COMMITTED":
            return _ack(record.client_message_id, mid, record.conversation_id, int(cseq), int(cat))
        if status == b"FRESH" and state == b"RESERVED":
            self._faults.hit("after_reserve")
        return await self._finish(commit_key, mid, keys.inflight())

    async def commit(self, actor: internal_pb2.Actor, raw: bytes) -> message_pb2.SendAck:
        """SEND_MESSAGE: direct sends here, group sends through GroupSends (same commit path)."""
        msg = parse_send(raw)
        kind = check_send_shape(msg)
        if len(actor.tenant_id) != 16 or actor.user_id == 0:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        tenant = int.from_bytes(actor.tenant_id, "big")
        if kind == CONVERSATION_KIND_GROUP:
            return await self.group_sender(actor, tenant, msg)
        recipients = direct_audience(tenant, actor.user_id, msg)
        record = self.new_record(actor, msg.conversation_id, msg.client_message_id, msg.message_type,
                                 msg.custom_type, msg.body)
        audience = self.audience(recipients=recipients, inline_body=inline_decision(len(recipients), len(msg.body)))
        return await self.run_commit("reserve_and_record", CommitKeys(tenant, msg.conversation_id), actor.user_id,
                                     identity_digest(msg), record, audience)

    async def _load(self, commit_key: str, message_id: bytes) -> tuple:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.get(record_key_for(commit_key, message_id))
                pipe.hmget(commit_key, "st", "aud", "cseq", "cat", "rec")
                record_bytes, fields = await pipe.execute()
        except Exception as exc:  # redis errors of any kind: the commit stays resumable
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        return (record_bytes, *fields)

    async def _record(self, commit_key: str, reserved_record: bytes) -> None:
        """RESERVED → RECORDED (the second call of split mode, also used by resumption)."""
        rec = message_pb2.MessageRecord.FromString(reserved_record)
        keys = CommitKeys(int.from_bytes(rec.tenant_id, "big"), rec.conversation_id)
        try:
            await self._scripts.call("record", [commit_key, keys.record(rec.message_id), keys.history()], [now_ms()])
        except (EngineError, ScriptError) as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
        self._faults.hit("after_record")

    async def _finish(self, commit_key: str, message_id: bytes, inflight: str) -> message_pb2.SendAck:
        """Resume an in-flight commit from its stored state up to COMMITTED."""
        record_bytes, state, audience, cseq, cat, reserved = await self._load(commit_key, message_id)
        if state == b"RESERVED":
            await self._record(commit_key, reserved)
            record_bytes, state, audience, cseq, cat, reserved = await self._load(commit_key, message_id)
        record = message_pb2.MessageRecord.FromString(record_bytes or b"")
        if state == b"COMMITTED" or audience is None:
            if state != b"COMMITTED":
                raise RequestError(ErrorCode.INTERNAL, "commit state lost its audience")
            return _ack(record.client_message_id, message_id, record.conversation_id, int(cseq), int(cat))
        if record_bytes is None:
            raise RequestError(ErrorCode.INTERNAL, "recorded message missing")
        outbox = audience + b"\x0a" + _varint(len(record_bytes)) + record_bytes
        try:
            _, offset = await self._producer.produce(OUTBOX_TOPIC, outbox, key=message_id, partition=0)
            self._faults.hit("after_outbox")
            res = await self._scripts.call("mark_committed", [commit_key, inflight],
                                           [offset, now_ms(), COMMIT_HELPER_TTL_MS])
        except (EngineError, ScriptError) as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "outbox or commit store unavailable") from exc
        self._faults.hit("after_commit")
        _, mid, cseq, cat = res
        return _ack(record.client_message_id, mid, record.conversation_id, int(cseq), int(cat))

    async def recover_once(self) -> int:
        """Resume every in-flight commit idle for more than the stale threshold; returns how many."""
        cutoff = now_ms() - self._stale_ms
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket in range(COMMIT_BUCKET_COUNT):
                pipe.zrangebyscore(inflight_key(bucket), "-inf", cutoff, start=0, num=64)
            found = await pipe.execute()
        resumed = 0
        for bucket, commit_keys in enumerate(found):
            for ck in commit_keys:
                ck = ck.decode()
                mid = await self._redis.hget(ck, "mid")
                if mid is None:  # expired or already gone: nothing to resume
                    await self._redis.zrem(inflight_key(bucket), ck)
                    continue
                await self._finish(ck, mid, inflight_key(bucket))
                resumed += 1
        return resumed

    async def recovery_loop(self) -> None:
        """CommitRecovery: background resumption through the same code path as requests."""
        while True:
            await asyncio.sleep(RECOVERY_PERIOD_S)
            try:
                n = await self.recover_once()
                if n:
                    logger.info("commit recovery resumed %d in-flight commits", n)
            except (RequestError, EngineError) as exc:
                logger.warning("commit recovery pass failed: %s", exc)
            except Exception:
                logger.exception("commit recovery pass crashed")


def _ack(cmid: bytes, mid: bytes, conversation_id: bytes, cseq: int, created_at: int) -> message_pb2.SendAck:
    return message_pb2.SendAck(client_message_id=cmid, message_id=mid, conversation_id=conversation_id,
                               conversation_seq=cseq, created_at_ms=created_at)
