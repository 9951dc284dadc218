"""Mailbox entry and event-group encoding (docs/design.md §5, seed 000 "事件组硬上限").

Event (big-endian): version u8 = 1 | event_type u8 (1..255) | flags u8 (bit0 has
client_message_id, bit1 has body, others 0) | message_type u32 (carried unchanged) |
event_id 16 | message_id 16 | conversation_id 16 | conversation_seq u64 | sender_id u64 |
created_at_ms u64 | custom_type_len u8 (<= 64) | custom_type | [client_message_id 16] |
[body_len u32 | body].
Group: count u8 (1..8) | count × (event_len u16 | event). At most 8 events, at most
8 KiB in all, at most one event per event_type.
"""

from qim._core.types import MailboxEvent

def pack_event(event: MailboxEvent) -> bytes:
    """Canonical bytes of one event. EventGroupError on a field out of range."""

def unpack_event(data: bytes) -> MailboxEvent:
    """Inverse of pack_event; EventGroupError on any malformed or trailing byte."""

def pack_group(events: list[MailboxEvent]) -> bytes:
    """Canonical bytes of an event group. EventGroupError on 0 or > 8 events, > 8 KiB,
    or two events of one event_type."""

def unpack_group(data: bytes) -> list[MailboxEvent]:
    """Inverse of pack_group with the same checks."""

def pack_each(prefix: bytes, event: MailboxEvent, event_ids: list[bytes]) -> list[bytes]:
    """[prefix ‖ pack_group([event with event_id e]) for e in event_ids]: one record's
    recipients' entries, which differ only in their event_id, packed once. EventGroupError
    as pack_group, or for an event_id that is not 16 non-zero bytes."""
