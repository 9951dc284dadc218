"""One coordinate type (qim._core.types.MessageCoord) for the fields a dispatch record and
a mailbox event both carry: the dispatch holds one, the event's flat layout (the frozen
event-group encoding) has exactly its fields at 2..8, and the mailbox builds each event
from the dispatch's coordinate."""

from __future__ import annotations

import os

from qim._core import eventgroup, ids
from qim._core.types import MailboxEvent, MessageCoord
from qim.services.mailbox.record import build_events, entries
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


def test_the_entries_are_the_packed_events_of_every_recipient():
    """record.entries (one event packed, each recipient's event_id written in) against the
    definition: build_events, each recipient's events packed alone."""
    mid = os.urandom(16)
    seq8 = os.urandom(8)
    for sender, recipients, body, cmid in [(5, (5, 9), b"hi", os.urandom(16)),  # direct: the sender's echo
                                           (9, tuple(range(100, 117)), None, os.urandom(16)),  # a group's shard
                                           (5, (5,), b"", b"")]:  # a control event: no cmid
        coord = MessageCoord(mid, ids.conversation_id_group(0, 77), 7, sender, 1_700_000_000_123, 1, b"")
        d = Dispatch(0, ids.dispatch_id(mid, 3), coord, 3, cmid, recipients, body)
        event, members = entries(d, seq8)
        assert members == [(u, seq8 + eventgroup.pack_group(evs)) for u, evs in build_events(d)]
        assert event.coord == coord and event.body == body and event.client_message_id == b""
