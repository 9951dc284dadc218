"""Mailbox entry events and event groups (docs/design.md §5) on both implementations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qim._core.types import MailboxEvent
from qim.consts import EVENT_GROUP_MAX_BYTES
from qim.errors import EventGroupError

from ._impls import COMPILED, PURE

EID, MID = bytes(range(1, 17)), bytes(range(17, 33))
CID, CMID = b"\x01" + bytes(range(40, 55)), b"\xcc" * 16


def ev(event_type=1, **kw) -> MailboxEvent:
    base = dict(event_type=event_type, event_id=EID, message_id=MID, conversation_id=CID,
                conversation_seq=5, sender_id=42, created_at_ms=1_717_000_000_000,
                message_type=1)
    base.update(kw)
    return MailboxEvent(**base)


def test_minimal_event_layout(eventgroup) -> None:
    raw = eventgroup.pack_event(ev())
    assert len(raw) == 80
    assert raw[:7] == b"\x01\x01\x00\x00\x00\x00\x01"  # version, type, flags, message_type
    assert raw[7:23] == EID and raw[23:39] == MID and raw[39:55] == CID
    assert raw[55:63] == (5).to_bytes(8, "big") and raw[79] == 0
    back = eventgroup.unpack_event(raw)
    assert back == ev() and type(back) is MailboxEvent
    assert back.body is None and back.client_message_id == b""


def test_all_optional_fields(eventgroup) -> None:
    full = ev(2, custom_type=b"x" * 64, client_message_id=CMID, body=b"\x00body\xff",
              message_type=0xFFFFFFFF, conversation_seq=2**63 - 1, sender_id=0)
    raw = eventgroup.pack_event(full)
    assert raw[2] == 0x03 and len(raw) == 80 + 64 + 16 + 4 + 6
    assert raw[-26:-10] == CMID and raw[-10:-6] == b"\x00\x00\x00\x06"
    assert eventgroup.unpack_event(raw) == full
    empty_body = ev(body=b"")
    raw = eventgroup.pack_event(empty_body)
    assert raw[2] == 0x02 and raw[-4:] == bytes(4)
    assert eventgroup.unpack_event(raw).body == b""  # b"" body differs from None (reference)
    assert eventgroup.unpack_event(bytearray(raw)) == empty_body
    assert eventgroup.pack_event(ev(custom_type=bytearray(b"ct"), body=memoryview(b"b"))) == \
        eventgroup.pack_event(ev(custom_type=b"ct", body=b"b"))


def test_unknown_message_type_is_carried(eventgroup) -> None:
    for mtype in (0, 3, 4, 5, 99, 2**32 - 1):
        assert eventgroup.unpack_event(eventgroup.pack_event(ev(message_type=mtype))).message_type == mtype


@pytest.mark.parametrize("bad", [
    dict(event_type=0), dict(event_type=256), dict(event_type=-1),
    dict(event_id=bytes(16)), dict(event_id=EID[:15]), dict(message_id=MID + b"\0"),
    dict(conversation_id=bytes(16)), dict(conversation_seq=2**63), dict(conversation_seq=-1),
    dict(sender_id=2**63), dict(created_at_ms=2**64), dict(message_type=2**32),
    dict(message_type=-1), dict(custom_type=b"x" * 65), dict(client_message_id=bytes(16)),
    dict(client_message_id=b"\x01" * 15), dict(client_message_id=b"\x01" * 17),
])
def test_pack_event_violations(eventgroup, bad) -> None:
    (field,) = bad  # the error names the offending field
    with pytest.raises(EventGroupError, match=field):
        eventgroup.pack_event(ev(**bad))


def test_pack_event_type_errors(eventgroup) -> None:
    for bad in (dict(event_id="x" * 16), dict(conversation_seq=1.0), dict(body="text")):
        with pytest.raises(TypeError):
            eventgroup.pack_event(ev(**bad))
    with pytest.raises(TypeError):
        eventgroup.pack_event((1, 2, 3))


def test_unpack_event_violations(eventgroup) -> None:
    raw = eventgroup.pack_event(ev(custom_type=b"abc", client_message_id=CMID, body=b"xyz"))
    for i in range(len(raw)):  # every truncation fails
        with pytest.raises(EventGroupError):
            eventgroup.unpack_event(raw[:i])
    mutations = [
        (raw + b"\0", "trailing bytes"), (b"\x00" + raw[1:], "unknown event version 0"),
        (raw[:1] + b"\x00" + raw[2:], "event_type 0"),
        (raw[:2] + b"\x07" + raw[3:], "unknown event flag bits 0x07"),
        (raw[:2] + b"\x01" + raw[3:], "trailing bytes"),  # body present but not flagged
        (raw[:2] + b"\x02" + raw[3:], "truncated body"),  # cmid read as body_len 0xcccccccc
        (raw[:79] + b"\x41" + raw[80:], "custom_type longer than 64"),
        (raw[:23] + bytes(16) + raw[39:], "message_id must be 16 non-zero"),
        (raw[:71] + b"\x80" + raw[72:], "bit 63"),
        (raw[:80 + 3] + bytes(16) + raw[80 + 3 + 16:], "client_message_id must be 16 non-zero"),
    ]
    for m, message in mutations:
        with pytest.raises(EventGroupError, match=message):
            eventgroup.unpack_event(m)


def test_group_round_trip_and_layout(eventgroup) -> None:
    events = [ev(t, body=b"b" * t) for t in (1, 2, 3, 4, 5, 6, 7, 8)]
    raw = eventgroup.pack_group(events)
    assert raw[0] == 8
    first = eventgroup.pack_event(events[0])
    assert raw[1:3] == len(first).to_bytes(2, "big") and raw[3:3 + len(first)] == first
    assert eventgroup.unpack_group(raw) == events
    assert eventgroup.pack_group(tuple(events[:1])) == eventgroup.pack_group(events[:1])


def test_group_limits(eventgroup) -> None:
    with pytest.raises(EventGroupError):
        eventgroup.pack_group([])
    with pytest.raises(EventGroupError):
        eventgroup.pack_group([ev(t) for t in range(1, 10)])
    with pytest.raises(EventGroupError):
        eventgroup.pack_group([ev(1), ev(2), ev(1, message_type=3)])
    exact = ev(body=b"z" * (EVENT_GROUP_MAX_BYTES - 3 - 84))
    raw = eventgroup.pack_group([exact])
    assert len(raw) == EVENT_GROUP_MAX_BYTES and eventgroup.unpack_group(raw) == [exact]
    with pytest.raises(EventGroupError):
        eventgroup.pack_group([ev(body=b"z" * (EVENT_GROUP_MAX_BYTES - 2 - 84))])
    with pytest.raises(EventGroupError):
        eventgroup.pack_group([ev(1, body=b"z" * 5000), ev(2, body=b"z" * 5000)])
    with pytest.raises(TypeError):
        eventgroup.pack_group(ev(1))


def _group_bytes(*raw_events: bytes, count: int | None = None) -> bytes:
    """A group encoded by hand (count byte, then u16 length + bytes per event)."""
    n = len(raw_events) if count is None else count
    return bytes([n]) + b"".join(len(r).to_bytes(2, "big") + r for r in raw_events)


def _full(event_type: int, body_len: int) -> MailboxEvent:
    """An event with every optional field non-empty (custom_type at its 64-byte limit)."""
    return ev(event_type, custom_type=bytes([0x40 + event_type]) * 64,
              client_message_id=bytes([event_type]) * 16, body=bytes([event_type]) * body_len,
              message_type=event_type * 1000, conversation_seq=event_type, sender_id=7)


def _eight_full_events_of(total: int) -> list[MailboxEvent]:
    """8 full events of distinct types whose group encodes to exactly `total` bytes."""
    per_event = 2 + 80 + 64 + 16 + 4  # length prefix, fixed part, custom_type, cmid, body_len
    budget = total - 1 - 8 * per_event
    sizes = [budget // 8] * 7 + [budget - 7 * (budget // 8)]
    return [_full(t, size) for t, size in zip(range(1, 9), sizes)]


def test_group_of_eight_full_events_at_8_kib(eventgroup) -> None:
    events = _eight_full_events_of(EVENT_GROUP_MAX_BYTES)
    raw = eventgroup.pack_group(events)
    assert len(raw) == EVENT_GROUP_MAX_BYTES and raw[0] == 8
    back = eventgroup.unpack_group(raw)
    assert back == events and all(type(e) is MailboxEvent for e in back)
    assert all(e.custom_type and e.client_message_id and e.body for e in back)
    too_big = _eight_full_events_of(EVENT_GROUP_MAX_BYTES + 1)
    with pytest.raises(EventGroupError, match="larger than 8 KiB"):
        eventgroup.pack_group(too_big)
    with pytest.raises(EventGroupError, match="larger than 8 KiB"):
        eventgroup.unpack_group(_group_bytes(*map(eventgroup.pack_event, too_big)))


@pytest.mark.parametrize("events,message", [
    ([], "needs 1..8 events, got 0"),
    ([ev(t) for t in range(1, 10)], "needs 1..8 events, got 9"),
    ([ev(1), ev(3), ev(3, body=b"other")], "two events of event_type 3"),
    ([ev(1, body=b"z" * 5000), ev(2, body=b"z" * 5000)], "larger than 8 KiB"),
    ([ev(1), ev(2, custom_type=b"x" * 65)], "custom_type"),
])
def test_pack_group_violation_errors(eventgroup, events, message) -> None:
    with pytest.raises(EventGroupError, match=message):
        eventgroup.pack_group(events)


def test_unpack_group_violations(eventgroup) -> None:
    one, two = eventgroup.pack_event(ev(1)), eventgroup.pack_event(ev(2))
    cases = [
        (b"", "empty event group"),
        (b"\x00", "count 0 not in 1..8"),
        (_group_bytes(one, two, count=9), "count 9 not in 1..8"),
        (_group_bytes(one, two, count=3), "truncated event length"),
        (_group_bytes(one, two) + b"\0", "trailing bytes after event group"),
        (_group_bytes(one, two)[:-1], "truncated event"),
        (_group_bytes(one, one), "two events of event_type 1"),
        (b"\x01\x00\x00", "shorter than its fixed part"),
        (b"\x01" + bytes(EVENT_GROUP_MAX_BYTES), "larger than 8 KiB"),
        (b"\x01" + (len(one) + 1).to_bytes(2, "big") + one + b"\0", "trailing bytes after event"),
    ]
    for bad, message in cases:
        with pytest.raises(EventGroupError, match=message):
            eventgroup.unpack_group(bad)


def test_pack_each_is_one_group_per_event_id(eventgroup) -> None:
    ids = [bytes([i]) * 16 for i in range(1, 40)]
    for event in (ev(), ev(2, client_message_id=CMID, body=b"b" * 300, custom_type=b"ct")):
        got = eventgroup.pack_each(b"SEQ8....", event, ids)
        assert got == [b"SEQ8...." + eventgroup.pack_group([event._replace(event_id=e)]) for e in ids]
        assert [eventgroup.unpack_group(g[8:])[0].event_id for g in got] == ids
    assert eventgroup.pack_each(b"", ev(), []) == []
    with pytest.raises(EventGroupError, match="event_id must be 16 non-zero bytes"):
        eventgroup.pack_each(b"", ev(), [EID, bytes(16)])
    with pytest.raises(EventGroupError, match="event_id must be 16 non-zero bytes"):
        eventgroup.pack_each(b"", ev(), [b"short"])
    with pytest.raises(EventGroupError):  # the event itself is checked, even for no ids
        eventgroup.pack_each(b"", ev(event_type=0), [])
    with pytest.raises(TypeError):
        eventgroup.pack_each(b"", ev(), [12345])
    with pytest.raises(TypeError):  # a list or a tuple, nothing lazier
        eventgroup.pack_each(b"", ev(), (e for e in ids))
    assert eventgroup.pack_each(b"", tuple(ev()), ids[:2]) == eventgroup.pack_each(b"", ev(), ids[:2])


# --- differential ---------------------------------------------------------------------

def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e))


id_st = st.one_of(st.binary(min_size=16, max_size=16), st.just(bytes(16)), st.binary(max_size=17))
u_st = st.one_of(st.integers(0, 100), st.integers(2**63 - 2, 2**63 + 1), st.integers(-1, 0))
event_st = st.builds(
    MailboxEvent, event_type=st.integers(-1, 257), event_id=id_st, message_id=id_st,
    conversation_id=id_st, conversation_seq=u_st, sender_id=u_st, created_at_ms=u_st,
    message_type=st.one_of(st.integers(0, 5), st.integers(2**32 - 1, 2**32)),
    custom_type=st.binary(max_size=66), client_message_id=st.one_of(st.just(b""), id_st),
    body=st.one_of(st.none(), st.binary(max_size=3000)),
)


@pytest.mark.differential
@settings(max_examples=300, deadline=None)
@given(events=st.lists(event_st, max_size=9), flip=st.tuples(st.integers(0), st.integers(0, 255)),
       junk=st.binary(max_size=120))
def test_differential(events, flip, junk) -> None:
    p, c = PURE["eventgroup"], COMPILED["eventgroup"]
    for e in events:
        got = _call(p.pack_event, e)
        assert got == _call(c.pack_event, e)
        if got[0] == "ok":
            assert c.unpack_event(got[1]) == p.unpack_event(got[1]) == e._replace(
                client_message_id=bytes(e.client_message_id))
    grp = _call(p.pack_group, events)
    assert grp == _call(c.pack_group, events)
    for e in events[:2]:  # every recipient's entry from one event (ids from the same strategy)
        ids = [e.event_id, e.message_id, e.conversation_id]
        assert _call(p.pack_each, junk[:8], e, ids) == _call(c.pack_each, junk[:8], e, ids)
    raw = bytearray(grp[1] if grp[0] == "ok" else junk)
    if raw:
        raw[flip[0] % len(raw)] = flip[1]
    raw = bytes(raw)
    assert _call(p.unpack_group, raw) == _call(c.unpack_group, raw)
    assert _call(p.unpack_event, raw[3:]) == _call(c.unpack_event, raw[3:])
    assert _call(p.unpack_event, junk) == _call(c.unpack_event, junk)
