"""REACT and TYPING in the writer (docs/decisions/0121-reactions-and-typing-are-ephemeral.md;
docs/protocol.md "Reactions and typing").

The writer owns these because it owns the conversation: it knows who may act on it and
who its members are. Neither takes the conversation's turn nor reserves a
conversation_seq: a reaction is the ephemeral_aggregate delivery kind (no mailbox entry,
no Outbox record, no unread, no move in the session list, no offline push) and typing is
stored nowhere. A REACT is: the actor's membership (O(1): the group's send view) and the
message (one GET) read concurrently, then one atomic script call on the message's
summary (qim/stores/reactions.py). The member list the live event goes to is cached per
(conversation, membership_version), so a busy message costs no member read per reaction.

Both answer an internal EphemeralDone (never seen by a client): the client's reply, the
event and the members it goes to; the gateway's half (qim/services/gateway/backends/
ephemeral.py) replies to the client and fans the event out to the members' online
devices through every gateway.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from google.protobuf.message import Message

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import common_pb2, history_pb2, internal_pb2, message_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN, Interval, contains, is_current
from qim.stores.messages import MessageStore
from qim.stores.reactions import ReactionStore, Summary
from qim.wire.reaction import REACTION_MAX_DISTINCT, TYPING_EXPIRES_MS, check_react, check_typing

MEMBER_CACHE_GROUPS = 1024  # member lists kept (LRU), each for one membership_version


def summary_message(summary: Summary, with_mine: bool = True) -> reaction_pb2.MessageReactionSummary:
    """The wire form of a Summary, its version included (`with_mine` False: the live events,
    whose readers differ)."""
    return reaction_pb2.MessageReactionSummary(version=summary.version, counts=[
        reaction_pb2.ReactionCount(emoji=c.emoji, count=c.count, mine=c.mine and with_mine) for c in summary.counts])


class Reactions:
    """The writer's REACT and TYPING handlers (module doc) over the message, group and
    reaction stores."""

    def __init__(self, messages: MessageStore, groups: GroupStore, reactions: ReactionStore) -> None:
        self._messages = messages
        self._groups = groups
        self._reactions = reactions
        self._members: OrderedDict[tuple[int, bytes], tuple[int, tuple[int, ...]]] = OrderedDict()

    async def _audience(self, tenant: int, user: int, conversation_id: bytes, peer: int,
                        refuse_muted: bool = False) -> tuple[tuple[Interval, ...], tuple[int, ...]]:
        """The actor's visible intervals and the conversation's current members.
        FORBIDDEN for a stranger or a former member; with `refuse_muted`, POLICY_REFUSED
        for a member an operator muted in the group (decision 0127: read in the same
        send_view round trip)."""
        if ids.conversation_kind(conversation_id) == CONVERSATION_KIND_DIRECT:
            if not peer or ids.conversation_id_direct(tenant, user, peer) != conversation_id:
                raise RequestError(ErrorCode.FORBIDDEN, "not a participant of this conversation")
            return OPEN, (user, peer)
        view = await self._groups.send_view(tenant, conversation_id, user)
        if view.version is None or view.intervals is None or not is_current(view.intervals):
            raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
        muted = view.muted(int(time.time() * 1000)) if refuse_muted else None
        if muted:
            raise RequestError(ErrorCode.POLICY_REFUSED, muted)
        key = (tenant, conversation_id)
        cached = self._members.get(key)
        if cached is None or cached[0] != view.version:
            group = await self._groups.read(tenant, conversation_id)
            cached = (view.version, tuple(group.current))
            self._members[key] = cached
            if len(self._members) > MEMBER_CACHE_GROUPS:
                self._members.popitem(last=False)
        self._members.move_to_end(key)
        return view.intervals, cached[1]

    async def visible_message(self, tenant: int, user: int, conversation_id: bytes, peer: int,
                              message_id: bytes) -> message_pb2.MessageRecord:
        """The record of a message `user` can see (REPORT, decision 0124): FORBIDDEN for a
        stranger or a former member, NOT_FOUND for a message it cannot see or a notice."""
        (intervals, _), found = await asyncio.gather(
            self._audience(tenant, user, conversation_id, peer), self._messages.get(tenant, conversation_id, message_id))
        rec = found.record if found is not None else None
        if (rec is None or rec.conversation_id != conversation_id or not _visible(intervals, rec.conversation_seq)
                or rec.message_type == common_pb2.MESSAGE_TYPE_CONTROL):
            raise RequestError(ErrorCode.NOT_FOUND, "no such message in this conversation")
        return rec

    async def react(self, actor: internal_pb2.Actor, tenant: int, req: reaction_pb2.React) -> bytes:
        """REACT: add or remove the actor's emoji (idempotent). NOT_FOUND for a message
        the actor cannot see, FORBIDDEN for a recalled one (adds only) or a non-member,
        POLICY_REFUSED for an add by a member muted in the group (decision 0127; taking
        one's own reaction away is not refused), PAYLOAD_TOO_LARGE past REACTION_MAX_DISTINCT emoji."""
        check_react(req)
        (intervals, members), found = await asyncio.gather(
            self._audience(tenant, actor.user_id, req.conversation_id, req.peer_user_id, not req.remove),
            self._messages.get(tenant, req.conversation_id, req.message_id))
        rec = found.record if found is not None else None
        if rec is None or rec.conversation_id != req.conversation_id or not _visible(intervals, rec.conversation_seq):
            raise RequestError(ErrorCode.NOT_FOUND, "no such message in this conversation")
        if rec.message_type == common_pb2.MESSAGE_TYPE_CONTROL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "a notice (CONTROL message) takes no reactions")
        if not req.remove and rec.state != message_pb2.MESSAGE_STATE_NORMAL:
            raise RequestError(ErrorCode.FORBIDDEN, "the message was recalled or deleted")
        change = await self._reactions.change(tenant, req.conversation_id, req.message_id, actor.user_id, req.emoji,
                                              not req.remove, REACTION_MAX_DISTINCT)
        if change.full:
            raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE,
                               f"a message carries at most {REACTION_MAX_DISTINCT} distinct emoji")
        done = _done(reaction_pb2.ReactOk(summary=summary_message(change.summary), changed=change.changed))
        if change.changed:
            event = reaction_pb2.ReactionEvents(
                conversation_id=req.conversation_id, message_id=req.message_id, user_id=actor.user_id,
                emoji=req.emoji, removed=req.remove, device_id=actor.device_id, version=change.summary.version,
                counts=summary_message(change.summary, with_mine=False).counts)
            done.event_opcode, done.event = Opcode.REACTION_EVENTS, event.SerializeToString()
            done.user_ids.extend(members)
        return done.SerializeToString()

    async def annotate(self, tenant: int, reader: int, conversation_id: bytes, batch: history_pb2.HistoryBatch) -> None:
        """Set `reactions` on each item of a history page that has any, or had (an empty
        summary with its version: a reader holding an older one learns they are gone), as
        `reader` sees them (one round trip for the page)."""
        ids_ = [item.message_id for item in batch.items]
        for item, summary in zip(batch.items, await self._reactions.summaries(tenant, conversation_id, ids_, reader)):
            if summary.counts or summary.version:
                item.reactions.CopyFrom(summary_message(summary))

    async def typing(self, actor: internal_pb2.Actor, tenant: int, req: reaction_pb2.Typing) -> bytes:
        """TYPING: FORBIDDEN for a non-member; the event to the other members (nothing stored)."""
        check_typing(req)
        _, members = await self._audience(tenant, actor.user_id, req.conversation_id, req.peer_user_id)
        event = reaction_pb2.TypingEvents(conversation_id=req.conversation_id, user_id=actor.user_id,
                                          device_id=actor.device_id, stopped=req.stopped,
                                          expires_in_ms=0 if req.stopped else TYPING_EXPIRES_MS)
        done = _done(reaction_pb2.TypingOk(delivered=True))
        done.event_opcode, done.event = Opcode.TYPING_EVENTS, event.SerializeToString()
        done.user_ids.extend(m for m in members if m != actor.user_id)  # one's own devices know
        return done.SerializeToString()


def _done(reply: Message) -> reaction_pb2.EphemeralDone:
    """An EphemeralDone carrying the client's `reply` and no event yet."""
    return reaction_pb2.EphemeralDone(reply=reply.SerializeToString())


def _visible(intervals: tuple[Interval, ...], seq: int) -> bool:
    return contains(intervals, seq)

