"""Replies and mentions of a send (docs/decisions/0120; issue 37).

A reply names a message of the same conversation by message_id; the writer, not the
client, takes its quoted preview from MessageStore when the reply is written (ReplyRef:
seq, sender, type, state, the first REPLY_PREVIEW_CHARS characters of a TEXT body), so a
reply to a recalled or deleted message stores that state and no preview. The replier
must see the target (a group member's intervals, docs/design.md §7): otherwise NOT_FOUND,
the answer for a message that does not exist, so nothing about it leaks.

Mentions name user ids or "all". In a group above MENTION_ALL_OPEN_MEMBERS current
members only the owner may mention all (FORBIDDEN otherwise). Reply target and mentions
are part of the send's identity (qim/wire/validate.py identity_digest): a retry with
other ones is CONFLICT. A send carrying either is never inlined in mailboxes: the pull
resolves its record and hands out the reply and mentions with it (qim/services/mailbox/pull.py).
"""

from __future__ import annotations

from qim._core import ids
from qim.consts import (
    CONVERSATION_KIND_GROUP,
    MENTION_ALL_OPEN_MEMBERS,
    MESSAGE_TYPE_CONTROL,
    MESSAGE_TYPE_TEXT,
    REPLY_PREVIEW_CHARS,
)
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.access import visible_interval
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore


def has_extras(msg: message_pb2.SendMessage) -> bool:
    """Whether the send replies or mentions (then SendExtras.fill runs and the body is referenced)."""
    return bool(msg.reply_to_message_id or msg.mention_user_ids or msg.mention_all)


def reply_ref(target: message_pb2.MessageRecord) -> message_pb2.ReplyRef:
    """The quoted preview of `target` as stored on a reply: its coordinates and state, and
    for a NORMAL TEXT body its first REPLY_PREVIEW_CHARS characters (invalid UTF-8 replaced)."""
    ref = message_pb2.ReplyRef(message_id=target.message_id, conversation_seq=target.conversation_seq,
                               sender_id=target.sender_id, message_type=target.message_type, state=target.state)
    if target.state == message_pb2.MESSAGE_STATE_NORMAL and target.message_type == MESSAGE_TYPE_TEXT:
        # at most 4 bytes a character: decode only what the preview can use
        ref.preview = target.body[:REPLY_PREVIEW_CHARS * 4].decode("utf-8", "replace")[:REPLY_PREVIEW_CHARS]
    return ref


class SendExtras:
    """Fills a send's record with its ReplyRef and mentions. Errors (RequestError):
    NOT_FOUND (no such message visible to the sender in this conversation),
    INVALID_ARGUMENT (a reply to a CONTROL message), FORBIDDEN (mention_all by a plain
    member of a large group)."""

    def __init__(self, messages: MessageStore, groups: GroupStore) -> None:
        self._messages = messages
        self._groups = groups

    async def fill(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage,
                   record: message_pb2.MessageRecord) -> None:
        """Set record.reply / mention_user_ids / mention_all from `msg` (checked as above)."""
        group = ids.conversation_kind(msg.conversation_id) == CONVERSATION_KIND_GROUP
        if msg.mention_all and group:
            view = await self._groups.read(tenant, msg.conversation_id)
            if len(view.current) > MENTION_ALL_OPEN_MEMBERS and view.owner != actor.user_id:
                raise RequestError(ErrorCode.FORBIDDEN, f"only the owner may mention all in a group above "
                                   f"{MENTION_ALL_OPEN_MEMBERS} members")
        if msg.reply_to_message_id:
            record.reply.CopyFrom(await self._target(actor, tenant, msg))
        record.mention_user_ids[:] = msg.mention_user_ids
        record.mention_all = msg.mention_all

    async def _target(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage
                      ) -> message_pb2.ReplyRef:
        stored = await self._messages.get(tenant, msg.conversation_id, msg.reply_to_message_id)
        target = stored.record if stored is not None else None
        if target is None or target.conversation_id != msg.conversation_id:
            raise RequestError(ErrorCode.NOT_FOUND, "reply_to_message_id: no such message in this conversation")
        if ids.conversation_kind(msg.conversation_id) == CONVERSATION_KIND_GROUP:
            vis = await visible_interval(self._groups, tenant, actor.user_id, msg.conversation_id, 0)
            if not vis.contains(target.conversation_seq):
                raise RequestError(ErrorCode.NOT_FOUND, "reply_to_message_id: no such message in this conversation")
        if target.message_type == MESSAGE_TYPE_CONTROL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "a reply cannot name a CONTROL message")
        return reply_ref(target)
