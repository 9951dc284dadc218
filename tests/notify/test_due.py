"""Which (device, message) pairs are due an alert (qim/services/notify/due.py;
docs/decisions/0135): the list's unread definition per device, in its order — expired,
recalled or deleted, read elsewhere, muted without a mention, connected — and which
dispatch records are candidates at all (never the sender, an operator, a CONTROL
message or a recall's record)."""

from __future__ import annotations

from qim._core.types import MessageCoord
from qim.consts import MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2
from qim.protocol import EventType
from qim.services.notify.due import Candidate, candidates, verdict_of
from qim.stores.convstate import MUTE_FOREVER
from qim.wire.dispatch import Dispatch

NOW, DAY = 10_000_000_000, 86_400_000
CONV, MSG = bytes([1]) + b"\x01" * 15, b"\x02" * 16
ME = 7
NORMAL, RECALLED = message_pb2.MESSAGE_STATE_NORMAL, message_pb2.MESSAGE_STATE_RECALLED


def record(**kw) -> message_pb2.MessageRecord:
    return message_pb2.MessageRecord(sender_id=3, conversation_seq=5, **kw)


def verdict(rec=None, state=NORMAL, read=4, muted=0, online=False, age=1000) -> str:
    c = Candidate(0, ME, CONV, MSG, 5, NOW - age)
    return verdict_of(c, rec if rec is not None else record(), state, read, muted, lambda: online, NOW, DAY)


def test_the_verdicts_follow_the_unread_definition_in_order() -> None:
    assert verdict() == "due"
    assert verdict(age=DAY + 1) == "suppressed_expired"
    assert verdict(state=RECALLED) == "suppressed_recalled"
    assert verdict_of(Candidate(0, ME, CONV, MSG, 5, NOW), None, NORMAL, 0, 0, lambda: False, NOW, DAY) == \
        "suppressed_recalled"  # the record is gone
    assert verdict(read=5) == "suppressed_read"
    assert verdict(muted=MUTE_FOREVER) == "suppressed_muted"
    assert verdict(muted=NOW + 1) == "suppressed_muted"
    assert verdict(muted=NOW - 1) == "due"  # a mute that ended
    assert verdict(rec=record(mention_user_ids=[ME]), muted=MUTE_FOREVER) == "due"
    assert verdict(rec=record(mention_all=True), muted=MUTE_FOREVER) == "due"
    assert verdict(online=True) == "suppressed_online"
    assert verdict(read=5, online=True) == "suppressed_read"  # read first: the cheaper, firmer reason


def test_candidates_are_the_recipients_of_a_message_but_its_sender_and_user_0() -> None:
    def dispatch(mtype: int, event: int, recipients: tuple[int, ...]) -> Dispatch:
        coord = MessageCoord(MSG, CONV, 5, 3, NOW, mtype)
        return Dispatch(0, b"\x09" * 16, coord, 0, b"\x00" * 16, recipients, None, event)
    got = candidates([dispatch(MESSAGE_TYPE_TEXT, EventType.MESSAGE, (0, 3, ME, 9)),
                      dispatch(MESSAGE_TYPE_CONTROL, EventType.MESSAGE, (ME,)),
                      dispatch(MESSAGE_TYPE_TEXT, EventType.RECALL, (ME,))])
    assert [(c.user, c.seq, c.created_at_ms) for c in got] == [(ME, 5, NOW), (9, 5, NOW)]
