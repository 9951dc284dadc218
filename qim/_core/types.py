"""Value types shared by the compiled core, its pure twins and the records built on them."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional


class MessageCoord(NamedTuple):
    """Where a message stands and what it is (docs/design.md §3): the fields every record of a
    committed message repeats, declared once. The dispatch record (qim/wire/dispatch.py)
    carries one; a MailboxEvent's fields 2..8 are exactly these, in this order (its flat
    layout is the frozen event-group encoding). ids are 16-byte big-endian `bytes`;
    `custom_type` at most 64 bytes (b"" unless message_type is CUSTOM)."""

    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: int
    custom_type: bytes = b""

    @classmethod
    def of(cls, record: Any) -> "MessageCoord":
        """The coordinate of anything that has these attributes (a MessageRecord, a
        Dispatch's decoded fields, a MailboxEvent)."""
        return cls(record.message_id, record.conversation_id, record.conversation_seq, record.sender_id,
                   record.created_at_ms, record.message_type, record.custom_type)


class MailboxEvent(NamedTuple):
    """One event of a user's mailbox entry (docs/design.md §5 step 4, §5 last paragraph).

    ids are 16-byte big-endian `bytes`; integers are unsigned. `custom_type` is at most
    64 bytes; `client_message_id` is b"" except in the sender's own entry (the
    reconciliation anchor, docs/design.md §5 step 3); `body` is None when the entry only
    references the message (filled from MessageStore at pull time) and the inline body
    bytes otherwise (may be b"").
    """

    event_type: int
    event_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: int
    custom_type: bytes = b""
    client_message_id: bytes = b""
    body: Optional[bytes] = None

    @classmethod
    def at(cls, event_type: int, event_id: bytes, coord: MessageCoord, client_message_id: bytes = b"",
           body: Optional[bytes] = None) -> "MailboxEvent":
        """The event of `event_type` for the message at `coord`."""
        return cls(event_type, event_id, *coord, client_message_id, body)

    @property
    def coord(self) -> MessageCoord:
        """The message this event is about (fields 2..8)."""
        return MessageCoord(*self[2:9])
