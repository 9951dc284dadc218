"""Local send validation (qim/sdk/validate.py): what the server would
refuse is refused before storing, with the server's codes; the limits themselves pass."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.consts import MAX_CUSTOM_TYPE_BYTES, MAX_MESSAGE_BODY
from qim.errors import ErrorCode
from qim.sdk import SendRefused
from qim.sdk.validate import check_send

T, ME, PEER = 3, 10, 20
DIRECT = ids.conversation_id_direct(T, ME, PEER)
GROUP = ids.conversation_id_group(T, 99)
OK = dict(conversation_id=DIRECT, recipient_user_id=PEER, body=b"x", message_type=1, custom_type=b"")


def check(max_body: int = MAX_MESSAGE_BODY, **change) -> None:
    check_send(T, ME, **{**OK, **change}, max_body=max_body)


@pytest.mark.parametrize("change,code", [
    (dict(body=bytes(MAX_MESSAGE_BODY + 1)), ErrorCode.PAYLOAD_TOO_LARGE),
    (dict(custom_type=b"c" * (MAX_CUSTOM_TYPE_BYTES + 1)), ErrorCode.PAYLOAD_TOO_LARGE),
    (dict(message_type=4), ErrorCode.INVALID_ARGUMENT),
    (dict(message_type=-1), ErrorCode.INVALID_ARGUMENT),
    (dict(message_type=1 << 32), ErrorCode.INVALID_ARGUMENT),
    (dict(message_type=1.0), ErrorCode.INVALID_ARGUMENT),
    (dict(body="text"), ErrorCode.INVALID_ARGUMENT),
    (dict(conversation_id=DIRECT[:15]), ErrorCode.INVALID_ARGUMENT),
    (dict(conversation_id=bytes(16)), ErrorCode.INVALID_ARGUMENT),
    (dict(conversation_id=b"\x09" + DIRECT[1:]), ErrorCode.INVALID_ARGUMENT),
    (dict(conversation_id=ids.conversation_id_room(T, 1)), ErrorCode.INVALID_ARGUMENT),
    (dict(recipient_user_id=PEER + 1), ErrorCode.INVALID_ARGUMENT),
    (dict(recipient_user_id=0), ErrorCode.INVALID_ARGUMENT),
    (dict(recipient_user_id=1 << 63), ErrorCode.INVALID_ARGUMENT),
    (dict(conversation_id=GROUP, recipient_user_id=PEER), ErrorCode.INVALID_ARGUMENT),
])
def test_refused_with_the_servers_code(change, code):
    with pytest.raises(SendRefused) as info:
        check(**change)
    assert info.value.code == code


def test_limits_themselves_pass_and_the_server_limit_rules():
    check(body=bytes(MAX_MESSAGE_BODY), custom_type=b"c" * MAX_CUSTOM_TYPE_BYTES, message_type=0xFFFFFFFF)
    check(conversation_id=GROUP, recipient_user_id=0, message_type=0)
    check(conversation_id=ids.conversation_id_direct(T, ME, ME), recipient_user_id=ME)  # notes to self
    with pytest.raises(SendRefused):
        check(body=bytes(1001), max_body=1000)  # AuthOk.max_body_bytes of this server
