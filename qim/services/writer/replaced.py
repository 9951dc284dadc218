"""What the sender is told of a body the send policy replaced (docs/decisions/0126).

A Replace verdict (the moderation webhook's 200 with a replaced body, or an in-process
policy's) commits the replaced body instead of the sent one, under the send's original
identity digest: a retry with the same client_message_id and the same original content
finds that commit (the kept verdict) and is answered from it, without asking the policy
again. SEND_ACK and EDIT_OK say so: `replaced` True and `body` the committed body.
"""

from __future__ import annotations

from typing import Optional

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import message_pb2
from qim.stores.messages import MessageStore


def checked_replacement(replacement: Optional[bytes], max_body: int) -> Optional[bytes]:
    """The policy's replacement, refused (RequestError POLICY_REFUSED) when it is larger
    than QIM_MAX_MESSAGE_BODY: a body no client could have sent is not committed."""
    if replacement is not None and len(replacement) > max_body:
        raise RequestError(ErrorCode.POLICY_REFUSED, "the moderator's replacement exceeds the body limit")
    return replacement


def mark_replaced(ack: message_pb2.SendAck, body: bytes) -> message_pb2.SendAck:
    """Tell the sender its send was committed with `body` instead of the sent one."""
    ack.replaced, ack.body = True, body
    return ack


async def replay_replaced(ack: message_pb2.SendAck, sent: bytes, messages: Optional[MessageStore],
                          tenant: int) -> message_pb2.SendAck:
    """A retry answered by an existing commit (its ack names another message_id than the
    one this attempt drew): read the committed record and tell `replaced` when its body
    is not the sent one. One MessageStore read, on retries of a moderated deployment only."""
    if messages is None:
        return ack
    stored = await messages.get(tenant, ack.conversation_id, ack.message_id)
    if stored is not None and stored.record.state == message_pb2.MESSAGE_STATE_NORMAL \
            and stored.record.version == 0 and stored.record.body != sent:
        return mark_replaced(ack, stored.record.body)
    return ack
