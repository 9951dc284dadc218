"""`Client.download` of a MEDIA message stored as recalled or deleted (qim/sdk/media.py):
its body, the signed reference, is gone, so the SDK answers MediaRefused 410 (the
service's word for it, docs/sdk.md "Media") before any request; it asked the service for
an empty media id before, and the app read "404: not found"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from qim.consts import MESSAGE_TYPE_MEDIA, MESSAGE_TYPE_TEXT
from qim.sdk.media import MediaCalls, MediaRefused


def _message(state: int, body: bytes = b"", message_type: int = MESSAGE_TYPE_MEDIA) -> SimpleNamespace:
    return SimpleNamespace(
        message_type=message_type, state=state, body=body, conversation_id=bytes(16), message_id=bytes(16)
    )


@pytest.mark.parametrize("state", [1, 2])
async def test_a_recalled_or_deleted_media_message_is_410_without_a_request(state: int) -> None:
    calls = MediaCalls()  # no media_url: a request would be a ValueError, not the 410
    with pytest.raises(MediaRefused) as info:
        await calls.download(_message(state))
    assert info.value.status == 410 and "recalled or deleted" in info.value.reason


async def test_a_text_message_is_still_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a MEDIA message"):
        await MediaCalls().download(_message(0, b"hi", MESSAGE_TYPE_TEXT))
