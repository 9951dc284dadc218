"""Typing end to end on real engines through the Python SDK (issue 37; decision 0121):
shown on the other member's devices on either gateway, never on the typist's own,
rate-limited per device (by the SDK and again by the gateway), stopped when told and
expiring by itself when not renewed; a stranger is refused; a client that knows neither
reactions nor typing keeps working."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import connection_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.sdk.events import ServerError
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import close_all
from tests.reactions.kit import on_gateway, typing_told
from tests.sdk.realstack import eventually, users

EXPIRY_WAIT_S = 40.0  # the 6 s expiry, on a busy machine


async def test_typing_shown_on_other_devices_and_expiring(two_gateways, tmp_path):
    st = two_gateways
    a, b = users(2)
    a1, a2 = await on_gateway(st, tmp_path, a, 1), await on_gateway(st, tmp_path, a, 2)
    b1, b2 = await on_gateway(st, tmp_path, b, 1), await on_gateway(st, tmp_path, b, 2)
    conv = (await a1.open_direct(b)).conversation_id
    await b2.open_direct(a)  # b's second device names the peer (as for a send)

    assert await a1.reactions.typing(conv) is True
    for d in (b1, b2):
        await eventually(lambda d=d: typing_told(d, conv) == [(a, True)], what="typing shown")
    assert b2.reactions.typing_in(conv) == [a]
    assert await a1.reactions.typing(conv) is False  # the SDK's own 2 s limit: nothing sent
    raw = reaction_pb2.Typing(conversation_id=conv, peer_user_id=b).SerializeToString()
    _, body = await a1.runtime.request(Opcode.TYPING, raw)  # past the SDK: the gateway's limit
    held = reaction_pb2.TypingOk.FromString(body)
    assert not held.delivered and 0 < held.retry_after_ms <= 2000

    # not renewed: it ends by itself on every device that showed it
    for d in (b1, b2):
        await eventually(lambda d=d: typing_told(d, conv) == [(a, True), (a, False)], timeout=EXPIRY_WAIT_S,
                         what="typing expired")
    assert b1.reactions.typing_in(conv) == []

    # started again by b, then stopped when told (long before it would expire)
    await b2.reactions.typing(conv)
    await eventually(lambda: typing_told(a1, conv) == [(b, True)], what="b typing on a1")
    await b2.reactions.typing(conv, stopped=True)
    await eventually(lambda: typing_told(a2, conv) == [(b, True), (b, False)], what="b stopped on a2")
    assert a2.reactions.typing_in(conv) == []
    assert typing_told(a1, conv)[:1] == [(b, True)] and typing_told(a2, conv)[-1] == (b, False)
    # never on the typist's own devices
    assert typing_told(a2, conv)[:1] != [(a, True)] and not [t for t in typing_told(b1, conv) if t[0] == b]
    await close_all(a1, a2, b1, b2)


async def test_typing_refused_to_a_stranger(two_gateways, tmp_path):
    st = two_gateways
    a, b, stranger = users(3)
    a1 = await on_gateway(st, tmp_path, a, 1)
    s1 = await on_gateway(st, tmp_path, stranger, 2)
    group = await a1.create_group([b])
    with pytest.raises(ServerError) as refused:
        await s1.reactions.typing(group.conversation_id)
    assert refused.value.code == ErrorCode.FORBIDDEN
    await close_all(a1, s1)


async def test_a_client_that_knows_neither_keeps_working(two_gateways, tmp_path):
    """An older client (frames only: it keeps id-0 frames it does not know aside) gets
    REACTION_EVENTS and TYPING_EVENTS between its replies and its requests still work."""
    st = two_gateways
    a, b = users(2)
    a1 = await on_gateway(st, tmp_path, a, 1)
    old = await RawClient.login(st, b, 3, addr=st.gateway_addrs[1])
    conv = (await a1.open_direct(b)).conversation_id
    ack = await a1.send_text(conv, "for the old client")
    await a1.reactions.add(conv, ack.message_id, "👍")
    await a1.reactions.typing(conv)
    op, reply = await old.send_text(a, b"still here")  # reads past the frames it does not know
    assert op == Opcode.SEND_ACK, reply
    async def pulled() -> bool:  # its own message reaches its mailbox after the ACK (fan-out)
        entries, _ = await old.pull_all()
        return {b"for the old client", b"still here"} <= {e.body for e in entries}
    await eventually(pulled, what="both messages pulled")
    async def both_seen() -> bool:  # a PING reads whatever arrived before its PONG
        await old.request(Opcode.PING, connection_pb2.Ping().SerializeToString())
        return {Opcode.REACTION_EVENTS, Opcode.TYPING_EVENTS} <= {o for o, _ in old.pushes}
    await eventually(both_seen, what="both kinds reached the old client")
    await old.close()
    await close_all(a1)


async def test_a_message_from_the_typist_ends_its_typing(two_gateways, tmp_path, monkeypatch):
    """b's devices stop showing a as typing when a's message arrives, not 6 s later: the
    expiry is switched off on b's device, so only the message can tell it stopped."""
    st = two_gateways
    a, b = users(2)
    a1, b2 = await on_gateway(st, tmp_path, a, 1), await on_gateway(st, tmp_path, b, 2)
    conv = (await a1.open_direct(b)).conversation_id
    await b2.open_direct(a)
    monkeypatch.setattr(b2.reactions, "_expire", lambda key, until: None)  # no end by time (module doc)
    assert await a1.reactions.typing(conv) is True
    await eventually(lambda: typing_told(b2, conv) == [(a, True)], what="typing shown on b2")
    await a1.send_text(conv, "here it is")
    await eventually(lambda: typing_told(b2, conv) == [(a, True), (a, False)], timeout=60, what="typing ended by the message")
    assert [m.body for m in await b2.messages(conv)] == [b"here it is"]
    assert b2.reactions.typing_in(conv) == []
    await close_all(a1, b2)
