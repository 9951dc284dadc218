"""Value types shared by the compiled core and its pure twins."""

from __future__ import annotations

from typing import NamedTuple, Optional


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
