"""Who may download a media object (issue 40; docs/decisions/0138): a member of the
conversation, within their member interval, whose view of it holds a message carrying the
reference, while that message is neither recalled nor deleted.

The same reads as the writer's REACT and REPORT checks (qim/services/writer/reactions.py
`_audience` and `visible_message`): a direct conversation's participants are the two ids
its conversation_id is derived from (the requester and `peer`), a group's are read from
its send view (the requester's intervals, current or not: a former member keeps what they
saw), and the message's conversation_seq must lie in one of the requester's intervals.
The message is read from the MessageStore (both tiers), never trusted from the client.
"""

from __future__ import annotations

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.proto.v1 import common_pb2, message_pb2
from qim.services.media.inspect import MediaRefused
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN, contains
from qim.stores.messages import MessageStore
from qim.wire.media import BadMediaRef, decode_ref


async def check_download(
    messages: MessageStore,
    groups: GroupStore,
    tenant: int,
    user: int,
    conversation_id: bytes,
    message_id: bytes,
    peer: int,
    media_id: str,
) -> None:
    """Return when `user` may fetch `media_id` through message `message_id` of
    `conversation_id` (`peer`: the other participant of a direct conversation); else
    MediaRefused: 403 not_member (a stranger), 404 no_message (a message the user cannot
    see, of another conversation, or without this reference), 410 gone (recalled or
    deleted: its media stops being served at once)."""
    if ids.conversation_kind(conversation_id) == CONVERSATION_KIND_DIRECT:
        if not peer or ids.conversation_id_direct(tenant, user, peer) != conversation_id:
            raise MediaRefused(403, "not_member", "not a participant of this conversation")
        intervals = OPEN
    else:
        view = await groups.send_view(tenant, conversation_id, user)
        if view.version is None or not view.intervals:
            raise MediaRefused(403, "not_member", "not a member of this conversation")
        intervals = view.intervals
    found = await messages.get(tenant, conversation_id, message_id)
    rec = found.record if found is not None else None
    if rec is None or rec.conversation_id != conversation_id or not contains(intervals, rec.conversation_seq):
        raise MediaRefused(404, "no_message", "no such message in this conversation for this user")
    if rec.state != message_pb2.MESSAGE_STATE_NORMAL:
        raise MediaRefused(410, "gone", "the message was recalled or deleted: its media is no longer served")
    if rec.message_type != common_pb2.MESSAGE_TYPE_MEDIA:
        raise MediaRefused(404, "no_message", "the message carries no media")
    try:
        ref = decode_ref(rec.body)
    except BadMediaRef:
        raise MediaRefused(404, "no_message", "the message carries no media") from None
    if ref.media_id != media_id:
        raise MediaRefused(404, "no_message", "the message does not carry this media")
