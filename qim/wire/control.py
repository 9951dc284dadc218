"""CONTROL message bodies (a ControlEvent: membership change or recall/delete): the one
decoder (`control_event`), the recall/delete a CONTROL record announces (the
HistoryArchiver applies it to the archived target; the archive audit expects it there;
docs/decisions/0023), and a message's created_at from its id. Pure codec."""

from __future__ import annotations

from typing import Optional

from google.protobuf.message import DecodeError

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.proto.v1 import message_pb2


def control_event(body: bytes) -> Optional[message_pb2.ControlEvent]:
    """The ControlEvent of a CONTROL body (b"" is an empty event), None when it does not
    parse: the caller decides whether that is corruption or a notice to skip."""
    try:
        return message_pb2.ControlEvent.FromString(body)
    except DecodeError:
        return None


def state_change_of(rec: message_pb2.MessageRecord) -> Optional[message_pb2.MessageStateChange]:
    """The recall/delete a CONTROL record announces (ControlEvent.state_change), None for
    any other record (another CONTROL body, a message of another type)."""
    if rec.message_type != MESSAGE_TYPE_CONTROL or rec.state != message_pb2.MESSAGE_STATE_NORMAL:
        return None
    event = control_event(rec.body)
    if event is None or event.WhichOneof("event") != "state_change":
        return None
    return event.state_change


def edit_of(rec: message_pb2.MessageRecord) -> Optional[message_pb2.MessageEdit]:
    """The edit a CONTROL record announces (ControlEvent.edit, docs/decisions/0120), None for
    any other record or a CONTROL record recalled since (its body is gone)."""
    if rec.message_type != MESSAGE_TYPE_CONTROL or rec.state != message_pb2.MESSAGE_STATE_NORMAL:
        return None
    event = control_event(rec.body)
    if event is None or event.WhichOneof("event") != "edit":
        return None
    return event.edit


def created_at_of(message_id: bytes) -> int:
    """created_at_ms of a message: the HLC physical part, the top 48 bits (docs/design.md §3)."""
    return int.from_bytes(message_id[:6], "big")
