"""UserConversationState through qim.sdk.Client on the real stack (issue 37; docs/decisions/0122):
pin, mute and hide on one device reach the user's other device and shape both lists and
the server's; a hidden conversation comes back with its next message; muting keeps the
unread count."""

from __future__ import annotations

from qim.errors import ErrorCode
from qim.sdk import MUTE_FOREVER, ConversationStateChanged, ServerError
from tests.e2e.sdkclient import client, close_all, server_list
from tests.sdk.realstack import eventually, users


async def _order(c) -> list[bytes]:
    return [x.conversation_id for x in await c.conversations()]


async def _server_order(c) -> list[bytes]:
    return list(await server_list(c))


async def _server_is(c, order: list[bytes]) -> bool:
    return await _server_order(c) == order


async def _server_unread(c, conv: bytes, n: int) -> bool:
    return (await server_list(c))[conv].unread == n


async def test_pin_mute_hide_on_one_device_reach_the_other_and_shape_the_lists(stack, tmp_path):
    a, b, me = users(3)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    m1, m2 = await client(stack, tmp_path, me, 1), await client(stack, tmp_path, me, 2)
    for c in (ca, cb, m1, m2):
        await c.connect()
    with_a = (await ca.open_direct(me)).conversation_id
    with_b = (await cb.open_direct(me)).conversation_id
    await ca.send_text(with_a, "older")
    await cb.send_text(with_b, "newer")
    for c in (m1, m2):
        await eventually(lambda c=c: len(c.told.messages()) >= 2, what="both chats' messages")
        await eventually(lambda c=c: _order(c), what="a list")
        assert await _order(c) == [with_b, with_a]  # newest first before any choice
    # the server registers both (its projection may lag the push a little on a busy machine)
    await eventually(lambda: _server_is(m1, [with_b, with_a]), timeout=60, what="both listed by the server")

    # pin the older chat on device 1: first on both devices and in the server's pages
    st = await m1.pin(with_a)
    assert st.pinned
    assert await _order(m1) == [with_a, with_b]
    await eventually(lambda: m2.conversation_state(with_a).pinned, what="pin synced to device 2")
    assert await _order(m2) == [with_a, with_b]
    # told as from elsewhere: the other device's sync or, when the session's SESSION_DELTA
    # with the same state arrives first, the server's (the second then changes nothing and
    # is not told again: qim/sdk/convstate.py _put); never as this device's own ("local")
    assert any(isinstance(e, ConversationStateChanged) and e.source in ("sync", "server") and e.state.pinned
               for e in m2.told.events)
    assert await _server_order(m2) == [with_a, with_b]

    # mute for ever on device 2: device 1 sees it, the unread count stays
    await cb.send_text(with_b, "while muted")
    await eventually(lambda: m1.store.conversation(with_b).unread == 2, what="two unread on device 1")
    st = await m2.mute(with_b)
    assert st.muted_until == MUTE_FOREVER and st.muted()
    await eventually(lambda: m1.conversation_state(with_b).muted_until == MUTE_FOREVER, what="mute synced")
    await eventually(lambda: _server_unread(m1, with_b, 2), timeout=60, what="two unread listed")
    entry = (await server_list(m1))[with_b]
    assert entry.muted_until == MUTE_FOREVER and entry.unread == 2 and entry.unread_exact
    assert (await m1.conversation(with_b)).unread == 2
    await m1.unmute(with_b)
    await eventually(lambda: m2.conversation_state(with_b).muted_until == 0, what="unmute synced")

    # hide the unpinned chat on device 1: gone from both lists, flagged in the server's
    await m1.hide(with_b)
    assert await _order(m1) == [with_a]
    await eventually(lambda: m2.conversation_state(with_b).hidden, what="hide synced")
    assert await _order(m2) == [with_a]
    assert [c.conversation_id for c in await m2.hidden_conversations()] == [with_b]
    assert (await server_list(m2))[with_b].hidden

    # a new message brings it back everywhere, with its unread count
    await cb.send_text(with_b, "back again")
    for c in (m1, m2):
        await eventually(lambda c=c: c.store.conversation(with_b).last_conversation_seq == 3, what="new message")
        assert set(await _order(c)) == {with_a, with_b}
        assert (await _order(c))[0] == with_a  # still pinned first
    await eventually(lambda: _server_unread(m2, with_b, 3), timeout=60, what="three unread listed")
    entry = (await server_list(m2))[with_b]
    assert not entry.hidden and entry.unread == 3

    # a device that starts now learns every choice from its first list pull
    m3 = await client(stack, tmp_path, me, 3)
    await m3.connect()
    await eventually(lambda: m3.conversation_state(with_a).pinned, what="pin on a new device")
    assert await _order(m3) == [with_a, with_b]
    await close_all(ca, cb, m1, m2, m3)


async def test_bad_state_requests_are_refused_with_the_reason(stack, tmp_path):
    a, b, stranger = users(3)
    ca, cs = await client(stack, tmp_path, a), await client(stack, tmp_path, stranger)
    await ca.connect()
    await cs.connect()
    conv = (await ca.open_direct(b)).conversation_id
    await ca.send_text(conv, "hi")
    group = (await ca.create_group([b])).conversation_id
    try:
        await cs.pin(group)
        raise AssertionError("a stranger pinned a group it is not in")
    except ServerError as exc:
        assert exc.code == ErrorCode.FORBIDDEN
    try:
        await cs.pin(conv)  # not listed for the stranger, no peer known
        raise AssertionError("a stranger pinned a direct chat of others")
    except ServerError as exc:
        assert exc.code in (ErrorCode.NOT_FOUND, ErrorCode.FORBIDDEN)
    await close_all(ca, cs)
