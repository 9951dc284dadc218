"""MessageCommitter: ABSENT → RESERVED → RECORDED → OUTBOXED → COMMITTED → SEND_ACK
(docs/design.md §5.2, seed 001 §2.3).

One CommitStore call reserves and records (idempotency, conversation_seq, frozen
audience, canonical MessageRecord, history index). The Outbox record is then produced
from the bytes the writer already holds (a fresh commit reads nothing back) and awaited;
its offset is the OUTBOXED evidence and is written by the same call that marks COMMITTED
(docs/decisions/0002-commit-keys.md). Only a COMMITTED result becomes a SendAck. A retry
of an in-flight send, and CommitRecovery for sends nobody retries, resume through
OutboxPublisher.resume.

The audience of a send is planned by the AudiencePlanner of its conversation kind
(planner.py: direct recipients, or a group's membership_version), given at construction.

Order (docs/decisions/0017): every reservation holds its conversation's turn
(sequencer.py) from the reserve until its Outbox record is enqueued, and publishes the
older unpublished commits of other writers that its reserve listed before its own, so
conversation_seq order = reserve order = Outbox order per conversation.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Optional, Protocol

from qim.consts import (
    COMMIT_OP_HELPER_TTL_MS,
    CONVERSATION_KIND_GROUP,
    EVENT_GROUP_MAX_BYTES,
    INLINE_BODY_BUDGET_BYTES,
    MAX_MESSAGE_BODY,
)
from qim.errors import ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer
from qim.obs import otel
from qim.obs.logcontext import bind, tracer
from qim.policy import PolicySeam, SendFacts
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.hlc import CeilingPassed, HlcClock
from qim.services.writer.metrics import WriterMetrics
from qim.services.writer.mutefirst import policy_check
from qim.services.writer.outbox import OutboxPublisher, ack
from qim.services.writer.replaced import checked_replacement, mark_replaced, replay_replaced
from qim.services.writer.replies import SendExtras, has_extras
from qim.services.writer.sequencer import ConversationTurns, Turn
from qim.stores.commits import (
    COMMITTED,
    RESERVED,
    CommitRef,
    CommitStore,
    GroupSendCheck,
    RefusalKept,
    Reservation,
    Reserved,
)
from qim.stores.errors import ClockBehind, MembershipMoved, RecordChanged, StoreUnavailable
from qim.stores.messages import MessageStore
from qim.wire.outbox import stored_record
from qim.wire.validate import check_send_shape, identity_digest

# Bytes of a mailbox event besides its body (eventgroup layout, worst case) plus the
# group framing: an inline body must leave room for them inside one 8 KiB group.
EVENT_OVERHEAD_MAX = 256
# Store refusals that mean "plan again from fresh reads", and how often (then UNAVAILABLE).
REPLAN = (MembershipMoved, RecordChanged)
REPLAN_ATTEMPTS = 3
# A reserve refused because another writer's id in the conversation is newer: observe
# it and take a new id; more than this many refusals in a row means the clock is unusable.
CLOCK_ATTEMPTS = 3

Reserve = Callable[[Reservation], Awaitable[Reserved]]


def inline_decision(recipient_count: int, body_len: int) -> bool:
    """Inline the body in mailbox entries when N × body ≤ 8 KiB and it fits one group."""
    return recipient_count * body_len <= INLINE_BODY_BUDGET_BYTES and body_len + EVENT_OVERHEAD_MAX <= EVENT_GROUP_MAX_BYTES


@dataclass
class SendPlan:
    """A planned audience: OutboxRecord audience fields (recipients, or the group's
    conversation and membership_version; inline_body) and, for a group, the check the
    reserve repeats atomically (MembershipMoved when it moved)."""

    audience: dict = field(default_factory=dict)
    group: Optional[GroupSendCheck] = None


class AudiencePlanner(Protocol):
    """Plans the audience of a send of one conversation kind (planner.py)."""

    async def plan(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage,
                   fresh: bool = False) -> SendPlan:
        """The audience of `msg` by `actor`; RequestError (FORBIDDEN, INVALID_ARGUMENT) for
        a send the actor may not make. May read (group membership) or plan from what it
        read before; `fresh` (the reserve refused the last plan: MembershipMoved) reads
        again. Never writes."""
        ...


def send_facts(actor: internal_pb2.Actor, tenant: int, kind: int, msg: message_pb2.SendMessage) -> SendFacts:
    """What the send policy sees of a direct or group SEND_MESSAGE (qim/policy), reply
    target and mentions included (decision 0120)."""
    return SendFacts(kind="group" if kind == CONVERSATION_KIND_GROUP else "direct", tenant=tenant,
                     user_id=actor.user_id, device_id=actor.device_id, conversation_id=msg.conversation_id,
                     message_type=msg.message_type, custom_type=msg.custom_type, body=msg.body,
                     client_message_id=msg.client_message_id, reply_to_message_id=msg.reply_to_message_id,
                     mention_user_ids=tuple(msg.mention_user_ids), mention_all=msg.mention_all)


@dataclass(frozen=True)
class StoreRefusals:
    """The send policy's refusal of one send kept in the CommitStore beside its commit
    keys, for COMMIT_OP_HELPER_TTL_MS (qim.policy.KeptRefusals; decision 0099, Amendment):
    a retry after a writer restart or failover gets the same refusal."""

    commits: CommitStore
    ref: CommitRef
    digest: bytes  # the send's identity digest: other content under this cmid is CONFLICT

    async def refuse(self, reason: str) -> Optional[str]:
        """KeptRefusals.refuse: CommitStore.refuse (None: a commit of the send exists)."""
        return await self.commits.refuse(self.ref, self.digest, reason, COMMIT_OP_HELPER_TTL_MS)

    async def refused(self) -> Optional[str]:
        """KeptRefusals.refused: CommitStore.refusal."""
        return await self.commits.refusal(self.ref, self.digest)

    async def committed(self) -> bool:
        """KeptRefusals.committed: CommitStore.exists."""
        return await self.commits.exists(self.ref)


class MessageCommitter:
    """The only component allowed to produce a SendAck.

    `await commit(actor, msg, turn)` -> message_pb2.SendAck. Raises RequestError:
    INVALID_ARGUMENT / PAYLOAD_TOO_LARGE / FORBIDDEN for bad input (before any sequence
    is consumed), CONFLICT for a reused cmid with other content, UNAVAILABLE when the
    commit store, the broker or the HLC window is not available or the previous send
    named by the request holds no commit state yet (the client retries with the same cmid).
    """

    def __init__(self, commits: CommitStore, producer: AsyncProducer, clock: HlcClock, shard_count: int,
                 faults: FaultPoints, planners: Mapping[int, AudiencePlanner],
                 metrics: Optional[WriterMetrics] = None, max_body: int = MAX_MESSAGE_BODY,
                 policy: Optional[PolicySeam] = None, extras: Optional[SendExtras] = None,
                 messages: Optional[MessageStore] = None) -> None:
        self._commits = commits
        self._messages = messages  # a retried send's committed body (replaced, decision 0126)
        self._extras = extras  # replies and mentions (docs/decisions/0120); None: refused
        self._policy = policy if policy is not None else PolicySeam(None)  # QIM_SEND_POLICY (0099)
        self._max_body = max_body  # QIM_MAX_MESSAGE_BODY, the limit the gateway checks too
        self._clock = clock
        self._shard_count = shard_count
        self._faults = faults
        self._planners = dict(planners)
        self.turns = ConversationTurns()
        self._m = metrics if metrics is not None else WriterMetrics()
        self.outbox = OutboxPublisher(commits, producer, faults, self._m)
        # Owner of this process's reservations in the conversations' unpublished sets:
        # new per process, so a restarted writer's leftovers count as another writer's.
        self.token = os.urandom(8).hex()

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
        """The frozen audience part of the Outbox record (shard_count filled in) with the
        message's trace id: 16 random bytes drawn here, at commit (the request's
        OpenTelemetry trace id when traced: one id, decision 0140), stored with the
        audience (a resumed commit keeps it) and carried by every record after it
        (docs/operations.md "Tracing")."""
        return internal_pb2.OutboxRecord(shard_count=self._shard_count, trace_id=otel.trace_id(), **fields)

    async def run_commit(self, ref: CommitRef, digest: bytes, record: message_pb2.MessageRecord,
                         audience: internal_pb2.OutboxRecord, turn: Turn, reserve: Reserve,
                         previous: bytes = b"") -> message_pb2.SendAck:
        """Reserve + record with `reserve` (a CommitStore reserving call), publish and mark
        COMMITTED. Waits for `turn` and releases it once the Outbox record is enqueued; on
        an exception the caller releases it (a re-plan keeps it). Raises RequestError
        (CONFLICT, FORBIDDEN, NOT_FOUND, UNAVAILABLE) or a REPLAN error."""
        audience_bytes = audience.SerializeToString()
        await turn.wait()
        reserved, prefix = await self._reserve(ref, digest, record, audience_bytes, reserve, previous)
        with bind(trace=audience.trace_id if reserved.fresh else None):  # a retry's stored trace is not ours
            return await self._after_reserve(ref, record, audience, audience_bytes, turn, reserved, prefix)

    async def _after_reserve(self, ref: CommitRef, record: message_pb2.MessageRecord,
                             audience: internal_pb2.OutboxRecord, audience_bytes: bytes, turn: Turn,
                             reserved: Reserved, prefix: bytes) -> message_pb2.SendAck:
        if reserved.state == COMMITTED:
            turn.release()
            return ack(ref.client_message_id, reserved.message_id, ref.conversation_id, reserved.conversation_seq,
                       reserved.created_at_ms)
        others = self.outbox.publish_older(reserved.older, ref)
        before = await self.outbox.resume(others) if others else []
        if reserved.fresh:
            if reserved.state == RESERVED:
                self._faults.hit("after_reserve")
                await self.outbox.record(ref, reserved.message_id)
            pending = self.outbox.enqueue(ref, reserved.message_id, stored_record(prefix, reserved.conversation_seq),
                                          audience_bytes, record.message_type)
        else:  # a retry of an in-flight commit: resume it from its stored state
            pending = (await self.outbox.resume([(ref, reserved.conversation_seq)]))[0]
        turn.release()
        self.outbox.complete_in_background(before)
        done = await self.outbox.complete(pending)
        tracer.debug("committed message_id=%s conversation_seq=%d", done.message_id.hex(), done.conversation_seq)
        return done

    async def _reserve(self, ref: CommitRef, digest: bytes, record: message_pb2.MessageRecord, audience: bytes,
                       reserve: Reserve, previous: bytes) -> tuple[Reserved, bytes]:
        """One reserving call with a fresh HLC id; a ClockBehind refusal is observed by
        the clock and retried with a newer id (bounded)."""
        conversation = (ref.tenant, ref.conversation_id)
        for _ in range(CLOCK_ATTEMPTS):
            try:
                record.message_id, record.created_at_ms = self._clock.next_id()
            except CeilingPassed:
                # paused or starved past the ceiling's slack: publish it now rather than
                # refuse the requests that waited for us (docs/decisions/0079-writer-failover.md)
                await self._clock.raise_ceiling()
                record.message_id, record.created_at_ms = self._clock.next_id()
            prefix = record.SerializeToString()
            scan = conversation in self.outbox.rescan
            started = time.perf_counter()
            try:
                reserved = await reserve(Reservation(
                    ref, digest, record.message_id, record.created_at_ms, prefix, audience, self.token,
                    split=self._faults.active, list_older=scan, previous=previous))
            except ClockBehind as exc:
                self._clock.observe(exc.message_id)
                await self._clock.catch_up()
                continue
            except StoreUnavailable as exc:
                raise RequestError(ErrorCode.UNAVAILABLE, "commit store unavailable") from exc
            self._m.stage.labels(stage="reserve").observe(time.perf_counter() - started)
            if scan:
                self.outbox.rescan.discard(conversation)
            return reserved, prefix
        raise RequestError(ErrorCode.UNAVAILABLE, "writer clock behind the conversation; retry")

    async def commit(self, actor: internal_pb2.Actor, msg: message_pb2.SendMessage, turn: Turn) -> message_pb2.SendAck:
        """SEND_MESSAGE: the audience from the planner of the conversation's kind (a group's
        membership may move between plan and reserve: planned again, bounded)."""
        kind = check_send_shape(msg, self._max_body)
        if len(actor.tenant_id) != 16 or actor.user_id == 0:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        planner = self._planners.get(kind)
        if planner is None:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "no sends to this conversation kind")
        tenant = int.from_bytes(actor.tenant_id, "big")
        ref = CommitRef(tenant, msg.conversation_id, actor.user_id, msg.client_message_id)
        digest = identity_digest(msg)
        facts = send_facts(actor, tenant, kind, msg) if self._policy.active else None
        replacement: Optional[bytes] = None
        for attempt in range(REPLAN_ATTEMPTS):
            # planned before the conversation's turn comes (reads overlap); a re-plan reads
            # again while the turn is held, so arrival order is kept
            plan = await planner.plan(actor, tenant, msg, fresh=attempt > 0)
            if attempt == 0 and facts is not None:
                # the send policy (docs/decisions/0099): after the plan (a non-member's send is
                # FORBIDDEN before any policy sees it), before the reserve, once per request;
                # a refusal is kept in the CommitStore while no commit of this cmid exists
                # a group mute wins over a refusal or hold of the policy (decision 0127, Amendment)
                replacement = checked_replacement(await policy_check(
                    self._policy, facts, StoreRefusals(self._commits, ref, digest),
                    getattr(planner, "groups", None)), self._max_body)
            # a replaced body (decision 0126) is committed under the original identity digest
            record = self.new_record(actor, msg.conversation_id, msg.client_message_id, msg.message_type,
                                     msg.custom_type, msg.body if replacement is None else replacement)
            if replacement is not None and len(replacement) > len(msg.body):
                plan.audience["inline_body"] = False  # planned for the sent size: the pull resolves it
            if has_extras(msg):
                if self._extras is None:
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "this writer takes no replies or mentions")
                await self._extras.fill(actor, tenant, msg, record)
                plan.audience["inline_body"] = False  # the pull resolves the record (decision 0120)
            group = plan.group

            def reserve(res: Reservation, group: Optional[GroupSendCheck] = group) -> Awaitable[Reserved]:
                # the token's revocation is checked in the reserve itself (docs/decisions/0080)
                res.device_id, res.token_iat = actor.device_id, actor.token_iat
                # a send the policy accepted now may have been refused before (another
                # writer process): the reserve reads the kept refusal in the same call
                res.policy_checked = facts is not None
                return self._commits.reserve(res, group)

            try:
                done = await self.run_commit(ref, digest, record, self.audience(**plan.audience), turn, reserve,
                                             msg.previous_client_message_id)
            except MembershipMoved:
                continue
            except RefusalKept as exc:  # the first answer stands (decision 0099, Amendment)
                if facts is None:  # only a policy-checked reserve reads a kept refusal
                    raise
                self._policy.refused_before(facts, exc.message)
            if facts is None:
                return done
            if done.message_id == record.message_id:  # this attempt's commit
                return done if replacement is None else mark_replaced(done, replacement)
            return await replay_replaced(done, msg.body, self._messages, tenant)  # a retry: the stored body tells
        raise RequestError(ErrorCode.UNAVAILABLE, "group membership kept changing; retry")
