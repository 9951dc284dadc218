"""The client-view verdict (qim/cli/verify.py) on hand-made views: every kind of wrong
telling is counted, and a clean view passes."""

from __future__ import annotations

from types import SimpleNamespace

from qim.cli.bodies import digest
from qim.cli.verify import AppView, Intent, expected_unread, judge
from qim.consts import MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_TEXT

CONV, OTHER = b"\x01" * 16, b"\x02" * 16


class MessagesAdded(SimpleNamespace):
    """Stands for the SDK event of that name (AppView tells events apart by class name)."""


class MessagesUpdated(SimpleNamespace):
    pass


class MessagesRemoved(SimpleNamespace):
    pass
A, B, C = 11, 22, 33


def intent(seq: int, sender: int, body: bytes, order: int, recipients=(B,), conv=CONV) -> Intent:
    return Intent(conv, sender, order, digest(body), len(body), MESSAGE_TYPE_TEXT, b"", frozenset(recipients),
                  message_id=conv[:8] + seq.to_bytes(8, "big"), conversation_seq=seq)


def row(seq: int, sender: int, body: bytes, conv=CONV, message_type=MESSAGE_TYPE_TEXT, **kw):
    return SimpleNamespace(message_id=conv[:8] + seq.to_bytes(8, "big"), conversation_id=conv, conversation_seq=seq,
                           sender_id=sender, body=body, message_type=message_type, custom_type=b"", **kw)


def told(user: int, *rows, events=None) -> AppView:
    """A view of `user` told `rows` in one MessagesAdded (or several: `events`)."""
    view = AppView(user, f"user {user}")
    for batch in events or [rows]:
        view.on_event(MessagesAdded(messages=tuple(batch)))
    view.on_event(SimpleNamespace(messages=tuple(rows)))  # other events are not messages
    return view


SENT = [intent(1, A, b"one", 0), intent(2, A, b"two", 1), intent(3, A, b"three", 2)]


def test_clean_view_delivers_everything():
    v = judge(SENT, [told(B, events=[[row(1, A, b"one"), row(2, A, b"two")], [row(3, A, b"three")]])])
    assert (v.delivered, v.lost, v.duplicated, v.out_of_order, v.corrupt) == (3, 0, 0, 0, 0), v.notes


def test_empty_or_truncated_body_is_corrupt_not_delivered():
    v = judge(SENT, [told(B, row(1, A, b""), row(2, A, b"tw"), row(3, A, b"three"))])
    assert (v.delivered, v.corrupt, v.lost) == (1, 2, 0)
    assert any("size 3 vs 0" in n for n in v.notes)


def test_same_length_other_bytes_is_corrupt():
    v = judge(SENT, [told(B, row(1, A, b"onE"), row(2, A, b"two"), row(3, A, b"three"))])
    assert v.corrupt == 1 and "digest" in v.notes[0]


def test_recalled_state_for_a_normal_message_is_corrupt():
    v = judge(SENT, [told(B, row(1, A, b"one", state=1), row(2, A, b"two"), row(3, A, b"three"))])
    assert v.corrupt == 1 and "state" in v.notes[0]


def test_a_later_update_must_still_show_what_was_sent():
    view = told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three"))
    view.on_event(MessagesUpdated(messages=(row(2, A, b"two"),)))  # same content: fine
    assert judge(SENT, [view]).delivered == 3
    view.on_event(MessagesUpdated(messages=(row(3, A, b"", state=1),)))  # recalled: nobody recalled it
    v = judge(SENT, [view])
    assert (v.delivered, v.corrupt) == (2, 1) and "updated" in v.notes[0]


def test_removed_message_is_lost():
    view = told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three"))
    view.on_event(MessagesRemoved(message_ids=(row(1, A, b"").message_id,)))
    v = judge(SENT, [view])
    assert (v.delivered, v.lost) == (2, 1) and "removed" in v.notes[0]


def test_missing_on_one_device_is_lost():
    v = judge(SENT, [told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three")),
                     told(B, row(1, A, b"one"), row(3, A, b"three"))])
    assert (v.delivered, v.lost) == (2, 1)


def test_told_twice_and_told_unsent_are_duplicates():
    v = judge(SENT, [told(B, row(1, A, b"one"), row(2, A, b"two"), row(2, A, b"two"), row(3, A, b"three"),
                          row(9, A, b"phantom"))])
    assert v.duplicated == 2 and v.delivered == 3


def test_control_and_unknown_outcome_are_not_duplicates():
    maybe = (CONV, A, digest(b"timed out"))
    v = judge(SENT, [told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three"),
                          row(4, A, b"x", message_type=MESSAGE_TYPE_CONTROL), row(5, A, b"timed out"))], [maybe])
    assert (v.duplicated, v.delivered) == (0, 3)


def test_order_as_told_per_conversation():
    other = intent(1, A, b"o", 0, conv=OTHER)
    v = judge([*SENT, other], [told(B, row(2, A, b"two"), row(1, A, b"one"), row(1, A, b"o", conv=OTHER),
                                    row(3, A, b"three"))])
    assert v.out_of_order == 1 and v.delivered == 4


def test_ack_order_against_submission_order():
    swapped = [intent(1, A, b"one", 1), intent(2, A, b"two", 0)]
    v = judge(swapped, [told(B, row(1, A, b"one"), row(2, A, b"two"))])
    assert v.out_of_order == 1


def test_own_messages_are_checked_when_told_but_not_required():
    v = judge(SENT, [told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three")), told(A, row(2, A, b"xx"))])
    assert v.corrupt == 1
    v = judge(SENT, [told(B, row(1, A, b"one"), row(2, A, b"two"), row(3, A, b"three")), told(A)])
    assert v.delivered == 3


def test_group_message_needs_every_member():
    sent = [intent(1, A, b"g", 0, recipients=(B, C))]
    assert judge(sent, [told(B, row(1, A, b"g")), told(C)]).lost == 1
    assert judge(sent, [told(B, row(1, A, b"g")), told(C, row(1, A, b"g"))]).delivered == 1


def test_expected_unread_follows_the_single_definition():
    sent = [intent(1, A, b"a1", 0), intent(2, B, b"b1", 0, recipients=(A,)), intent(3, A, b"a2", 1),
            intent(4, A, b"a3", 2)]
    sent.append(Intent(CONV, A, 3, b"", 1, MESSAGE_TYPE_CONTROL, b"", frozenset({B}), b"\x05" * 16, 5))
    assert expected_unread(sent, B, CONV) == 2      # own send at 2 marks read; the CONTROL at 5 never counts
    assert expected_unread(sent, A, CONV) == 0      # own messages never unread
    assert expected_unread(sent, B, CONV, read_seq=3) == 1
    assert expected_unread(sent, B, OTHER) == 0


def test_recalled_message_must_end_shown_recalled_without_body():
    sent = [intent(1, A, b"one", 0), intent(2, A, b"two", 1)]
    sent[0].recalled = True
    whole_then_recalled = told(B, row(1, A, b"one"), row(2, A, b"two"))
    assert judge(sent, [whole_then_recalled]).corrupt == 1  # never updated: still shows the text
    whole_then_recalled.on_event(MessagesUpdated(messages=(row(1, A, b"", state=1),)))
    assert judge(sent, [whole_then_recalled]).delivered == 2
    assert judge(sent, [told(B, row(1, A, b"", state=1), row(2, A, b"two"))]).delivered == 2  # told after the recall
    leaked = told(B, row(1, A, b"one", state=1), row(2, A, b"two"))  # recalled but the text still there
    assert judge(sent, [leaked]).corrupt == 1
    assert expected_unread(sent, B, CONV) == 1
