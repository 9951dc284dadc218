"""qim-desktop's pure parts: slash commands and what the screen says (no server)."""

from __future__ import annotations

import pytest

from qim.desktop import commands, render
from qim.proto.v1 import message_pb2
from qim.sdk.model import Conversation, LastMessage, PendingSend, StoredMessage

ME = 1001


def stored(seq: int, sender: int, body: str, state: int = 0, message_type: int = 1, custom: bytes = b""):
    return StoredMessage(seq.to_bytes(16, "big"), b"c" * 16, seq, sender, 0, message_type, custom,
                         body.encode(), None, 0, state)


def conv(unread: int, exact: bool = True, group: int = 0, left: int = 0, last=None) -> Conversation:
    return Conversation(b"c" * 16, 2 if group else 1, 0 if group else 1002, group, 0, unread, exact, 5, None,
                        last, 0, left)


def test_commands_parse_and_refuse_clearly():
    assert commands.parse("你好") == (None, "你好")
    assert commands.parse("//etc/passwd is a path") == (None, "/etc/passwd is a path")
    assert commands.parse("/dm 42") == (commands.Command("dm", (42,)), "")
    assert commands.parse(" /group 1 2 3 ") == (commands.Command("group", (1, 2, 3), ""), "")
    assert commands.parse("/recall") == (commands.Command("recall", ()), "")
    for bad, why in (("/dm", "usage"), ("/dm x", "not a user id"), ("/nope", "unknown"), ("/quit now", "no"),
                     ("/group", "usage"), (f"/dm {1 << 63}", "not a user id")):
        with pytest.raises(commands.CommandError, match=why):
            commands.parse(bad)


def test_badges_follow_unread_and_the_exact_flag():
    assert render.badge(conv(0)) == ""
    assert render.badge(conv(3)) == "(3)"
    assert render.badge(conv(200, exact=False)) == "(200+)"
    entry = render.list_entry(conv(2, group=77, left=9), ME, current=True).plain
    assert entry.startswith("▶ group 77 (left) (2)")


def test_messages_render_text_as_typed_never_as_markup():
    line = render.message_line(stored(7, 1002, "[bold]不是标记[/] 🙂\n第二行"), ME).plain
    assert "1002: [bold]不是标记[/] 🙂\n      第二行" in line  # not numbered: seqs have gaps (render.py)
    assert "(message recalled)" in render.message_line(stored(8, ME, "", state=1), ME).plain
    assert "<custom:demo.card> 2 bytes" in render.message_line(stored(9, ME, "{}", message_type=3,
                                                                      custom=b"demo.card"), ME).plain
    pending = PendingSend(b"x" * 16, 1, b"c" * 16, 1002, 1, b"", "稍等".encode(), 0, "pending")
    text = render.transcript([stored(1, 1002, "hi")], [pending], ME, note="(beginning of the conversation)").plain
    assert text.splitlines()[0] == "(beginning of the conversation)" and text.endswith("me: 稍等 (sending…)")


def test_previews_describe_control_messages_and_cut_long_text():
    created = message_pb2.ControlEvent(membership=message_pb2.MembershipChange(kind=1, users=[1, 2],
                                                                              actor_user_id=ME))
    last = LastMessage(b"m" * 16, 3, ME, 0, 4, b"", created.SerializeToString(), True, 0)
    assert render.preview(last, ME, cells=60) == f"user {ME} created the group with 1, 2"
    long = LastMessage(b"m" * 16, 3, 1002, 0, 1, b"", ("长" * 100).encode(), True, 0)
    assert render.preview(long, ME).endswith("…") and render.preview(long, ME).startswith("1002: 长")
    cut = LastMessage(b"m" * 16, 3, 1002, 0, 1, b"", b"", False, 0)
    assert render.preview(cut, ME) == "1002: (long message)"
