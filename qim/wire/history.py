"""Wire form of a stored message for history pages and session heads (docs/design.md §5
step 7, §6; docs/protocol.md HISTORY_BATCH): the one definition, used by the writer's
PULL_HISTORY and by SessionProjection's list heads."""

from __future__ import annotations

from typing import Optional

from qim.proto.v1 import history_pb2, message_pb2


def history_item(rec: message_pb2.MessageRecord, actor_user: int,
                 body_limit: Optional[int] = None) -> history_pb2.HistoryItem:
    """HistoryItem of a stored record for `actor_user`: recalled/deleted records carry no
    body, and neither does a body above `body_limit` bytes (session heads:
    body_included false, the client reads it from history). The actor's own messages
    carry their client_message_id (the SDK's reconciliation anchor). Replies, mentions and
    the edit mark (version > 0, the body is the latest version) come with it."""
    included = rec.state == message_pb2.MESSAGE_STATE_NORMAL and (body_limit is None or len(rec.body) <= body_limit)
    item = history_pb2.HistoryItem(
        message_id=rec.message_id, conversation_seq=rec.conversation_seq, sender_id=rec.sender_id,
        created_at_ms=rec.created_at_ms, message_type=rec.message_type, custom_type=rec.custom_type,
        body=rec.body if included else b"", body_included=included, state=rec.state,
        client_message_id=rec.client_message_id if rec.sender_id == actor_user else b"")
    copy_extras(rec, item)
    return item


def copy_extras(rec: message_pb2.MessageRecord, out) -> None:
    """Reply, mentions and edit version of a stored record onto its HistoryItem or
    MailboxEntry (docs/decisions/0120); a recalled/deleted record keeps its mentions and
    reply target (who was named is no body) but no edit mark."""
    if rec.HasField("reply"):
        out.reply.CopyFrom(rec.reply)
    out.mention_user_ids[:] = rec.mention_user_ids
    out.mention_all = rec.mention_all
    if rec.state == message_pb2.MESSAGE_STATE_NORMAL and rec.version:
        out.version, out.edited_at_ms = rec.version, rec.edits.edited_at_ms
