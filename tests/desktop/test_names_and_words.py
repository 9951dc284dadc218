"""qim-desktop's words, without a screen: names and titles beside ids, list rows that
fit their column, no message numbers, the connection state with its reason, unsent
messages that say they wait, /help with arguments, /group with a title."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from qim.desktop import commands, render
from qim.proto.v1 import message_pb2
from qim.sdk.model import Conversation, LastMessage, PendingSend, StoredMessage

ME = 1001


def conv(group: int = 0, title: str = "", unread: int = 0, last=None) -> Conversation:
    return Conversation(b"c" * 16, 2 if group else 1, 0 if group else 1002, group, 0, unread, True, 5, None, last,
                        0, 0, title)


def test_titles_and_display_names_are_shown_ids_stay_beside():
    assert render.conversation_name(conv(group=77)) == "group 77"
    assert render.conversation_name(conv(group=77, title="周末 hiking")) == "周末 hiking"
    assert render.conversation_name(conv()) == "user 1002"
    assert render.conversation_name(conv(), {1002: "Bob"}) == "Bob (1002)"
    msg = StoredMessage(b"m" * 16, b"c" * 16, 9, 1002, 0, 1, b"", b"hi", None, 0, 0)
    assert render.message_line(msg, ME, {1002: "Bob"}).plain.endswith(" Bob: hi")
    assert "#9" not in render.message_line(msg, ME).plain  # no numbers: CONTROL messages leave gaps


def test_control_notices_for_titles_read_as_words():
    renamed = message_pb2.ControlEvent(title_change=message_pb2.GroupTitleChange(group_id=7, title="Lunch",
                                                                                actor_user_id=1002))
    assert render.describe_control(renamed.SerializeToString(), {1002: "Bob"}) == 'Bob named the group "Lunch"'
    created = message_pb2.ControlEvent(membership=message_pb2.MembershipChange(kind=1, users=[ME, 1002],
                                                                              actor_user_id=ME, title="Lunch"))
    assert render.describe_control(created.SerializeToString()) == f'user {ME} created the group with {ME}, 1002, ' \
                                                                   'named "Lunch"'


def test_list_rows_are_two_lines_that_fit_the_list_column():
    long_cjk = LastMessage(b"m" * 16, 3, 1002, 0, 1, b"", ("很长的消息" * 20).encode(), True, 0)
    for entry in (conv(group=9, title="一个非常非常非常长的群名字真的很长", unread=250, last=long_cjk),
                  conv(last=long_cjk)):
        lines = render.list_entry(entry, ME, current=True, names={1002: "A very long display name indeed"}).plain
        assert len(lines.split("\n")) == 2
        assert all(cell_len(line) <= render.LIST_CELLS for line in lines.split("\n")), lines


def test_connection_state_names_its_reason_and_unsent_rows_say_they_wait():
    assert render.connection_words("ready") == "● online"
    assert render.connection_words("offline", "token refused: token expired") == "○ offline: token expired"
    assert render.connection_words("offline", "tls refused") == "○ offline: tls refused"
    row = PendingSend(b"x" * 16, 1, b"c" * 16, 1002, 1, b"", "稍等".encode(), 0, "pending")
    assert render.unsent_line(row).plain.endswith("稍等 (sending…)")
    assert render.unsent_line(row, online=False).plain.endswith("稍等 (not sent yet: offline)")


def test_help_shows_arguments_and_keys_and_group_takes_a_title():
    for usage in ("/dm USER", "/group USER... [NAME]", "/title NAME", "/recall [N]", "/older", "/read"):
        assert usage in commands.HELP
    assert "Tab" in commands.KEYS and "Enter opens" in commands.KEYS
    assert commands.parse("/group 5 6 5 Lunch  crew") == (commands.Command("group", (5, 6), "Lunch crew"), "")
    assert commands.parse("/title 周末") == (commands.Command("title", (), "周末"), "")
    assert commands.parse("/recall 2") == (commands.Command("recall", (2,)), "")
    for bad in ("/title", "/title \x1b[31m", "/group Lunch", "/recall 1 2"):
        with pytest.raises(commands.CommandError):
            commands.parse(bad)
