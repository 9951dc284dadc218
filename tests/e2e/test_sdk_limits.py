"""Sends the server would refuse are refused by the SDK before anything is stored,
against the real stack (docs/design.md §4 validation): a typed error at
once, never a SendTimeout and a pending row for ever."""

from __future__ import annotations

import time

import pytest

from qim._core import ids
from qim.consts import MAX_MESSAGE_BODY
from qim.errors import ErrorCode
from qim.sdk import SendRefused, direct_conversation
from tests.sdk.realstack import runtime, shutdown, users

ALL_STATES = ("pending", "acked", "committed", "failed")


async def test_over_limit_and_malformed_sends_are_refused_before_storing(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    rt = runtime(stack, tmp_path, a, send_timeout=5)
    await rt.connect()
    assert rt.max_body_bytes == MAX_MESSAGE_BODY  # from AuthOk.max_body_bytes
    cases = [
        (dict(body=bytes(5 << 20)), ErrorCode.PAYLOAD_TOO_LARGE),
        (dict(body=bytes(MAX_MESSAGE_BODY + 1)), ErrorCode.PAYLOAD_TOO_LARGE),
        (dict(body=b"x", custom_type=b"t" * 65), ErrorCode.PAYLOAD_TOO_LARGE),
        (dict(body=b"x", message_type=4), ErrorCode.INVALID_ARGUMENT),  # CONTROL is the server's
        (dict(body=b"x", message_type=-1), ErrorCode.INVALID_ARGUMENT),
        (dict(body=b"x", message_type=1 << 32), ErrorCode.INVALID_ARGUMENT),
        (dict(body=b"x", conversation_id=conv[:15]), ErrorCode.INVALID_ARGUMENT),
        (dict(body=b"x", conversation_id=bytes(16)), ErrorCode.INVALID_ARGUMENT),
        (dict(body=b"x", conversation_id=ids.conversation_id_room(0, 5)), ErrorCode.INVALID_ARGUMENT),
        (dict(body=b"x", recipient_user_id=b + 1), ErrorCode.INVALID_ARGUMENT),  # not this conversation's peer
        (dict(body=b"x", recipient_user_id=0), ErrorCode.INVALID_ARGUMENT),
        (dict(), ErrorCode.INVALID_ARGUMENT),  # an empty TEXT shows nothing
        (dict(body=" \u3000\n".encode()), ErrorCode.INVALID_ARGUMENT),  # white space in any script too
    ]
    for change, code in cases:
        args = dict(conversation_id=conv, recipient_user_id=b, body=b"", message_type=1, custom_type=b"")
        args.update(change)
        start = time.monotonic()
        with pytest.raises(SendRefused) as info:
            await rt.send_message(**args)
        assert info.value.code == code, (change.keys(), info.value)
        assert time.monotonic() - start < 1.0  # refused locally, not after a timeout
        assert await rt.store.run(rt.store.pending_sends, ALL_STATES) == []  # nothing stored
    ok = await rt.send_message(conv, b, b"x" * 64, custom_type=b"t" * 64)  # the limits themselves pass
    assert ok.conversation_seq >= 1
    await shutdown(rt)
