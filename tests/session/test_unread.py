"""The single unread definition (docs/design.md §6) and the head form, on plain records."""

from __future__ import annotations

import pytest

from qim.consts import MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_CUSTOM, MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2
from qim.services.session.summary import PageError, count_unread, head_item, parse_member_intervals

ME, PEER = 5, 9


def rec(seq: int, sender: int = PEER, mtype: int = MESSAGE_TYPE_TEXT,
        state: int = message_pb2.MESSAGE_STATE_NORMAL) -> message_pb2.MessageRecord:
    return message_pb2.MessageRecord(message_id=seq.to_bytes(16, "big"), conversation_seq=seq, sender_id=sender,
                                     message_type=mtype, state=state, body=b"b%d" % seq,
                                     client_message_id=b"c" * 16)


def test_counts_only_others_messages_above_the_base():
    records = [rec(1), rec(2), rec(3, sender=ME), rec(5), rec(9)]  # gaps are legal
    assert count_unread(records, ME, base=0, hi=None) == 4
    assert count_unread(records, ME, base=2, hi=None) == 2  # never latest - read (= 7)
    assert count_unread(records, ME, base=9, hi=None) == 0


def test_control_recalled_and_deleted_never_count_but_unknown_types_do():
    records = [rec(1, mtype=MESSAGE_TYPE_CONTROL), rec(2, state=message_pb2.MESSAGE_STATE_RECALLED),
               rec(3, state=message_pb2.MESSAGE_STATE_DELETED), rec(4, mtype=MESSAGE_TYPE_CUSTOM), rec(5, mtype=99)]
    assert count_unread(records, ME, base=0, hi=None) == 2


def test_member_interval_bounds_the_count():
    records = [rec(s) for s in range(1, 11)]
    assert count_unread(records, ME, base=3, hi=6) == 3  # 4, 5, 6: after leaving nothing counts


def test_head_withholds_recalled_bodies_and_foreign_cmids():
    mine = head_item(rec(3, sender=ME), ME)
    assert mine.body == b"b3" and mine.body_included and mine.client_message_id == b"c" * 16
    theirs = head_item(rec(4), ME)
    assert theirs.client_message_id == b""
    recalled = head_item(rec(5, state=message_pb2.MESSAGE_STATE_RECALLED), ME)
    assert recalled.body == b"" and not recalled.body_included and recalled.state == message_pb2.MESSAGE_STATE_RECALLED


def test_member_interval_parsing_fails_closed():
    assert parse_member_intervals(b"0:0", b"g" * 16) == ((0, None),)
    assert parse_member_intervals(b"4:17", b"g" * 16) == ((4, 17),)
    assert parse_member_intervals(b"0:5,9:0", b"g" * 16) == ((0, 5), (9, None))  # left and re-joined
    for raw in (None, b"", b"4", b"x:1", b"0:0,9:0", b"0:9,5:0", b"7:3"):
        with pytest.raises(PageError):
            parse_member_intervals(raw, b"g" * 16)
