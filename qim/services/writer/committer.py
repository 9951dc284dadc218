"""MessageCommitter: ABSENT → RESERVED → RECORDED → OUTBOXED → COMMITTED → SEND_ACK
(DESIGN.md §5.2, seed 001 §2.3).

One Lua call reserves and records (idempotency, conversation_seq, frozen audience,
canonical MessageRecord, history index). The Outbox record is then produced from the
bytes the writer already holds (a fresh commit reads nothing back) and awaited; its
offset is the OUTBOXED evidence and is written by the same Lua call that marks COMMITTED
(docs/decisions/0002-commit-keys.md). Only a COMMITTED result becomes a SendAck. A retry
of an in-flight send, and CommitRecovery for sends nobody retries, resume through
OutboxPublisher.resume.

Order (docs/decisions/0017): every reservation holds its conversation's turn
(sequencer.py) from the reserve until its Outbox record is enqueued, and publishes the
older unpublished commits of other writers that its reserve listed before its own, so
conversation_seq order = reserve order = Outbox order per conversation.
"""

from __future__ import annotations

import os
from typing import Sequence

from qim.consts import CONVERSATION_KIND_GROUP, EVENT_GROUP_MAX_BYTES, INLINE_BODY_BUDGET_BYTES, UNPUBLISHED_SCAN_MAX
from qim.errors import EngineError, ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.redis.client import LuaScripts, ScriptError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.hlc import HlcClock, now_ms
from qim.services.writer.keys import CommitKeys
from qim.services.writer.outbox import OutboxPublisher, ack, full_record
from qim.services.writer.sequencer import ConversationTurns, Turn
from qim.services.writer.validate import check_send_shape, direct_audience, identity_digest

# Bytes of a mailbox event besides its body (eventgroup layout, worst case) plus the
# group framing: an inline body must leave room for them inside one 8 KiB group.
EVENT_OVERHEAD_MAX = 256
# Script refusals that mean "plan again from fresh reads" (bounded by the caller).
REPLAN = frozenset({"QIM_MEMBERSHIP_CHANGED", "QIM_RECORD_CHANGED"})
SCRIPT_ERRORS = {"QIM_CONFLICT": ErrorCode.CONFLICT, "QIM_FORBIDDEN": ErrorCode.FORBIDDEN,
                 "QIM_NOT_FOUND": ErrorCode.NOT_FOUND, "QIM_PREVIOUS_PENDING": ErrorCode.UNAVAILABLE}
# A reserve refused because another writer's id in the conversation is newer: observe
# it and take a new id; more than this many refusals in a row means the clock is unusable.
CLOCK_ATTEMPTS = 3


class Replan(Exception):
    """The group membership or the target record moved between read and commit."""


def inline_decision(recipient_count: int, body_len: int) -> bool:
    """Inline the body in mailbox entries when N × body ≤ 8 KiB and it fits one group."""
    return recipient_count * body_len <= INLINE_BODY_BUDGET_BYTES and body_len + EVENT_OVERHEAD_MAX <= EVENT_GROUP_MAX_BYTES


class MessageCommitter:
    """The only component allowed to produce a SendAck.

    `await commit(actor, msg, turn)` -> message_pb2.SendAck. Raises RequestError:
    INVALID_ARGUMENT / PAYLOAD_TOO_LARGE / FORBIDDEN for bad input (before any sequence
    is consumed), CONFLICT for a reused cmid with other content, UNAVAILABLE when Redis,
    the broker or the HLC window is not available or the previous send named by the
    request holds no commit state yet (the client retries with the same cmid).
    """

    def __init__(self, redis, scripts: LuaScripts, producer: AsyncProducer, clock: HlcClock,
                 shard_count: int, faults: FaultPoints) -> None:
        self._redis = redis
        self._scripts = scripts
        self._clock = clock
        self._shard_count = shard_count
        self._faults = faults
        self.turns = ConversationTurns()
        self.outbox = OutboxPublisher(redis, scripts, producer, faults)
        # Owner of this process's reservations in the conversations' unpublished sets:
        # new per process, so a restarted writer's leftovers count as another writer's.
        self.token = os.urandom(8).hex()
        self.group_sender = None  # set by the writer: GroupSends.send (groups.py)

    def ticket(self, tenant_id: bytes, conversation_id: bytes) -> Turn:
        """A turn in the conversation's line; call before the request's first await."""
        return self.turns.ticket(tenant_id + conversation_id)

    def new_record(self, actor: internal_pb2.Actor, conversation_id: bytes, cmid: bytes, message_type: int,
                   custom_type: bytes, body: bytes) -> message_pb2.MessageRecord:
        """A canonical record without message_id and created_at: run_commit stamps them
        from the HLC when the conversation's turn comes, so ids follow reserve order."""
        return message_pb2.MessageRecord(
            tenant_id=actor.tenant_id, conversation_id=conversation_id, sender_id=actor.user_id,
            sender_device_id=actor.device_id, client_message_id=cmid, message_type=message_type,
            custom_type=custom_type, body=body)

    def audience(self, **fields) -> internal_pb2.OutboxRecord:
        """The frozen audience part of the Outbox record (shard_count filled in)."""
        return internal_pb2.OutboxRecord(shard_count=self._shard_count, **fields)

    async def run_commit(self, script: str, keys: CommitKeys, sender_id: int, digest: bytes,
                         record: message_pb2.MessageRecord, audience: internal_pb2.OutboxRecord, turn: Turn,
                         extra_keys: Sequence[str] = (), extra_args: Sequence = (),
                         previous: bytes = b"") -> message_pb2.SendAck:
        """Reserve + record with `script` (the common KEYS/ARGV of commit_lib.lua first),
        publish and mark COMMITTED. Waits for `turn` and releases it once the Outbox
        record is enqueued; on an exception the caller releases it (a Replan keeps it).
        Raises RequestError (CONFLICT, FORBIDDEN, NOT_FOUND, UNAVAILABLE) or Replan."""
        commit_key = keys.commit(sender_id, record.client_message_id)
        audience_bytes = audience.SerializeToString()
        await turn.wait()
        (status, state, mid, cseq, cat, older), prefix = await self._reserve(
            script, keys, commit_key, digest, record, audience_bytes, extra_keys, extra_args, previous)
        cmid = record.client_message_id
        if state == b"COMMITTED":
            turn.release()
            return ack(cmid, mid, record.conversation_id, int(cseq), int(cat))
        seq = int(cseq)
        others = self.outbox.publish_older(keys, older, commit_key)
        before = await self.outbox.resume(keys, others) if others else []
        if status == b"FRESH":
            if state == b"RESERVED":
                self._faults.hit("after_reserve")
                await self.outbox.record(commit_key, keys, mid)
            pending = self.outbox.enqueue(commit_key, keys, cmid, mid, full_record(prefix, seq), audience_bytes,
                                          record.message_type)
        else:  # a retry of an in-flight commit: resume it from its stored state
            pending = (await self.outbox.resume(keys, [(commit_key, seq)]))[0]
        turn.release()
        self.outbox.complete_in_background(before)
        return await self.outbox.complete(pending)

    async def _reserve(self, script: str, keys: CommitKeys, commit_key: str, digest: bytes,
                       record: message_pb2.MessageRecord, audience: bytes, extra_keys: Sequence[str],
                       extra_args: Sequence, previous: bytes) -> tuple[list, bytes]:
        """One reserving Lua call with a fresh HLC id; a QIM_CLOCK_BEHIND refusal is
        observed by the clock and retried with a newer id (bounded)."""
        prev_key = keys.commit(record.sender_id, previous) if previous else commit_key
        split = "1" if self._faults.active else "0"
        for _ in range(CLOCK_ATTEMPTS):
            record.message_id, record.created_at_ms = self._clock.next_id()
            prefix = record.SerializeToString()
            scan = "1" if keys.conv_hex in self.outbox.rescan else "0"
            try:
                reply = await self._scripts.call(
                    script,
                    [commit_key, keys.seq(), keys.record(record.message_id), keys.history(), keys.inflight(),
                     keys.unpublished(), keys.unpublished_owners(), keys.last_id(), prev_key, *extra_keys],
                    [digest, record.message_id, record.created_at_ms, prefix, audience, now_ms(), split,
                     self.token, scan, "1" if previous else "0", UNPUBLISHED_SCAN_MAX, *extra_args])
            except ScriptError as exc:
                if exc.reason == "QIM_CLOCK_BEHIND":
                    self._clock.observe(bytes.fromhex(str(exc).split()[1]))
                    await self._clock.catch_up()
                    continue
                if exc.reason in REPLAN:
                    raise Replan(exc.reason) from None
                code = SCRIPT_ERRORS.get(exc.reason, ErrorCode.INTERNAL)
                raise RequestError(code, str(exc).split(" script:")[0].split(" ", 1)[-1]) from None
            except EngineError as exc:
                raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
            if scan == "1":
                self.outbox.rescan.discard(keys.conv_hex)
            return reply, prefix
        raise RequestError(ErrorCode.UNAVAILABLE, "writer clock behind the conversation; retry")

    async def commit(self, actor: internal_pb2.Actor, msg: message_pb2.SendMessage, turn: Turn) -> message_pb2.SendAck:
        """SEND_MESSAGE: direct sends here, group sends through GroupSends (same commit path)."""
        kind = check_send_shape(msg)
        if len(actor.tenant_id) != 16 or actor.user_id == 0:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        tenant = int.from_bytes(actor.tenant_id, "big")
        if kind == CONVERSATION_KIND_GROUP:
            return await self.group_sender(actor, tenant, msg, turn)
        recipients = direct_audience(tenant, actor.user_id, msg)
        record = self.new_record(actor, msg.conversation_id, msg.client_message_id, msg.message_type,
                                 msg.custom_type, msg.body)
        audience = self.audience(recipients=recipients, inline_body=inline_decision(len(recipients), len(msg.body)))
        return await self.run_commit("reserve_and_record", CommitKeys(tenant, msg.conversation_id), actor.user_id,
                                     identity_digest(msg), record, audience, turn,
                                     previous=msg.previous_client_message_id)
