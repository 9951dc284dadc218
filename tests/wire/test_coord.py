"""One coordinate type (qim._core.types.MessageCoord) for the fields a dispatch record and
a mailbox event both carry: the dispatch holds one, the event's flat layout (the frozen
event-group encoding) has exactly its fields at 2..8, and the mailbox builds each event
from the dispatch's coordinate."""

from __future__ import annotations

import os

from qim._core import eventgroup, ids
from qim._core.types import MailboxEvent, MessageCoord
from qim.services.mailbox.record import build_events
from qim.wire.dispatch import Dispatch, decode


def test_the_event_layout_is_the_coordinate_in_place():
    assert MailboxEvent._fields[2:9] == MessageCoord._fields
    assert MailboxEvent._fields[:2] == ("event_type", "event_id")


def test_a_dispatch_carries_its_coordinate_to_every_recipients_event():
    mid = os.urandom(16)
    coord = MessageCoord(mid, ids.conversation_id_direct(0, 5, 9), 7, 5, 1_700_000_000_123, 3, b"card")
    d = Dispatch(0, ids.dispatch_id(mid, 2), coord, 2, os.urandom(16), (5, 9), b"hi")
    again = decode(d.encode())
    assert again == d and again.coord == coord and MessageCoord.of(coord) == coord
    events = dict(build_events(again))
    assert set(events) == {5, 9}
    for user, (ev,) in events.items():
        assert ev.coord == coord and ev.body == b"hi"
        assert ev.client_message_id == (d.client_message_id if user == 5 else b"")  # the sender's own entry only
        assert eventgroup.unpack_group(eventgroup.pack_group([ev])) == [ev]
