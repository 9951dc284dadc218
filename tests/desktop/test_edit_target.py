"""`/edit TEXT` in qim-desktop replaces the person's newest message that can be edited:
not a recalled one, and not a photo or file (the writer refuses a MEDIA edit with
"FORBIDDEN: a MEDIA message cannot be edited", so after /attach the text before the
photo is the one meant; a newcomer found /edit refused there). The app is a stand-in
holding the rows shown; `client.edit` records what it was asked."""

from __future__ import annotations

import types

import pytest

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop import replies
from qim.sdk.model import StoredMessage

ME, PEER, CONV = 7, 9, b"c" * 16


def row(seq: int, sender: int, body: bytes, mtype: int = 1, state: int = 0) -> StoredMessage:
    return StoredMessage(bytes([seq]) * 16, CONV, seq, sender, 1000 + seq, mtype, b"", body, None, seq, state)


class Client:
    user_id = ME

    def __init__(self) -> None:
        self.asked: list = []

    async def edit(self, conv: bytes, message_id: bytes, text: str):
        self.asked.append((conv, message_id, text))
        return types.SimpleNamespace(version=2)


def app_with(*rows: StoredMessage):
    return types.SimpleNamespace(shown={r.message_id: r for r in rows}, client=Client(), current=CONV)


async def test_edit_skips_a_newer_photo_and_takes_the_text_before_it():
    text, photo = row(1, ME, b"see you at 12"), row(2, ME, b"\x00ref", MESSAGE_TYPE_MEDIA)
    app = app_with(text, photo, row(3, PEER, b"ok"))
    said = await replies.edit(app, "see you at 12:30")
    assert app.client.asked == [(CONV, text.message_id, "see you at 12:30")]
    assert said.startswith('edited "see you at 12"')


async def test_edit_with_only_photos_or_recalled_texts_says_there_is_nothing_to_edit():
    app = app_with(row(1, ME, b"", state=1), row(2, ME, b"\x00ref", MESSAGE_TYPE_MEDIA))
    with pytest.raises(ValueError, match="no message of yours here to edit"):
        await replies.edit(app, "x")
    assert app.client.asked == []
