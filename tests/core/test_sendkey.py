"""qim._core.sendkey: the gateway's fast path of send_key against the full path it
stands for (parse_send, check_send_shape, direct_audience of qim/wire/validate.py), on
both implementations; compiled against pure in test_differential.py (SPECS).

The rule is one-sided (qim/_core/_pure/sendkey.py): a key from the fast path is the key
the full path returns; a send the full path refuses is None on the fast path; and the
sends the gateway sees every second (plain, well formed, accepted) take the fast path.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from qim.consts import U63_MAX
from qim.errors import IdError, RequestError
from qim.proto.v1 import message_pb2
from qim.wire.validate import check_send_shape, direct_audience, parse_send

from ._impls import COMPILED, PURE, PURE_MODE
from ._strategies import SEND_MAX_BODY, send_case

TENANT, ALICE, BOB = 7, 1001, 1002


def _full(body: bytes, tenant: int, user: int, max_body: int) -> bytes:
    """The gateway's send_key without the fast path (qim/services/gateway/backends/writer.py)."""
    msg = parse_send(body)
    if check_send_shape(msg, max_body) == 1:
        direct_audience(tenant, user, msg)
    return msg.conversation_id


def _plain(ids, **fields) -> bytes:
    send = dict(client_message_id=os.urandom(15) + b"\x01", recipient_user_id=BOB, message_type=1,
                body=b"hello, bob", conversation_id=ids.conversation_id_direct(TENANT, ALICE, BOB))
    send.update(fields)
    return message_pb2.SendMessage(**send).SerializeToString()


@settings(max_examples=600, deadline=None,  # the fixture is a module, nothing to reset
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=send_case())
def test_fast_path_answers_as_the_full_path(sendkey, case) -> None:
    body, tenant, user, max_body = case
    try:
        want = _full(body, tenant, user, max_body)
    except (RequestError, IdError):
        assert sendkey.route_key(body, tenant, user, max_body) is None
        return
    got = sendkey.route_key(body, tenant, user, max_body)
    assert got is None or got == want


def test_plain_sends_take_the_fast_path(sendkey, ids) -> None:
    direct = ids.conversation_id_direct(TENANT, ALICE, BOB)
    group = ids.conversation_id_group(TENANT, 55)
    cases = [
        _plain(ids),
        _plain(ids, previous_client_message_id=b"\x02" * 16, custom_type=b"x" * 64, body=b"a" * SEND_MAX_BODY),
        _plain(ids, message_type=2, body=b""),  # IMAGE: no blank-text rule
        _plain(ids, message_type=99),  # an enum value newer than this gateway
        _plain(ids, body="你好".encode()),
        _plain(ids, body="\u3000\t 好".encode()),  # white space first, then text
        _plain(ids, body=b"\x00\x00\x17\x5e" + b"\xff" * 12),  # qim-loadgen's: a timestamp first
        _plain(ids, conversation_id=group, recipient_user_id=0, group_id=55),
    ]
    for body in cases:
        key = sendkey.route_key(body, TENANT, ALICE, SEND_MAX_BODY)
        assert key is not None and key == _full(body, TENANT, ALICE, SEND_MAX_BODY)
    from_bob = _plain(ids, recipient_user_id=ALICE)
    assert sendkey.route_key(from_bob, TENANT, BOB, SEND_MAX_BODY) == direct  # either side of the pair
    assert sendkey.route_key(from_bob, TENANT, ALICE, SEND_MAX_BODY) is None  # not Alice's own peer


@pytest.mark.parametrize("fields,tail", [
    ({"body": b" \xe3\x80\x80"}, b""),  # blank TEXT: the full path refuses it
    ({"body": b"\xff hello"}, b""),  # malformed UTF-8 first: the full path judges blankness
    ({"body": b" \xed\xa0\x80"}, b""),  # an encoded surrogate after a space: malformed too
    ({"message_type": 4}, b""),  # CONTROL
    ({"recipient_user_id": U63_MAX + 1}, b""),
    ({"recipient_user_id": 3}, b""),  # not the pair's conversation
    ({"mention_user_ids": [5]}, b""),
    ({"reply_to_message_id": b"\x03" * 16}, b""),
    ({}, b"\x0a\x10" + b"\x04" * 16),  # client_message_id twice: protobuf keeps the last
    ({}, b"\x60\x01"),  # an unknown field
    ({}, b"\x08\x01"),  # client_message_id with a varint's wire type
    ({}, b"\x20\x81\x80\x80\x80\x80\x80\x80\x80\x80\x01"),  # message_type past the int32 enum
    ({}, b"\x32"),  # a length cut off
])
def test_the_rest_goes_to_the_full_path(sendkey, ids, fields, tail) -> None:
    assert sendkey.route_key(_plain(ids, **fields) + tail, TENANT, ALICE, SEND_MAX_BODY) is None


def test_arguments(sendkey, ids) -> None:
    body = _plain(ids)
    assert sendkey.route_key(bytearray(body), TENANT, ALICE, SEND_MAX_BODY) is None  # bytes only
    assert sendkey.route_key(body, TENANT, ALICE, 3) is None  # over the body limit
    assert sendkey.route_key(body, TENANT, ALICE, 1 << 80) is not None
    with pytest.raises(TypeError):
        sendkey.route_key(body, TENANT, ALICE, "300")


@pytest.mark.differential
@pytest.mark.skipif(PURE_MODE, reason="needs the compiled core")
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=send_case())
def test_twins_agree_on_sends(case) -> None:
    assert COMPILED["sendkey"].route_key(*case) == PURE["sendkey"].route_key(*case)
