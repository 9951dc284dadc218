"""A group the user left: the SDK's unread follows the server's one definition (member
intervals, left_at; docs/architecture.md "unread") on both of the user's devices, the
one that left and the other, after every sync (qim/sdk/conversations.py)."""

from __future__ import annotations

from tests.e2e.sdkclient import client, close_all, server_list, unread_pair
from tests.sdk.realstack import eventually, users


async def test_a_left_group_has_the_servers_unread_on_both_devices(stack, tmp_path):
    p, u = users(2)
    cp = await client(stack, tmp_path, p)
    cu1, cu2 = await client(stack, tmp_path, u, 1), await client(stack, tmp_path, u, 2)
    for c in (cp, cu1, cu2):
        await c.connect()
    group = await cp.create_group([u])
    conv = group.conversation_id
    for i in range(4):
        await cp.send_text(conv, f"before the leave {i}")
    for c in (cu1, cu2):
        await eventually(lambda c=c: len(c.told.messages(conv)) >= 4, what="four messages on both devices")
        assert await unread_pair(c, conv) == ((4, True), (4, True))
    await cu1.leave_group(group.group_id)  # without reading
    listed = {}

    async def server_knows() -> bool:
        listed["entry"] = (await server_list(cu1))[conv]
        return listed["entry"].left_at > 0 and listed["entry"].read_conversation_seq >= listed["entry"].left_at

    await eventually(server_knows, what="the server's list has the leave and its read position", timeout=20)
    theirs = listed["entry"]
    served = (theirs.unread, theirs.unread_exact)
    assert served == (0, True)  # the server's definition: the leaver's own CONTROL message marks it read

    async def agrees(c) -> bool:
        mine = await c.conversation(conv)
        return mine is not None and mine.left_at == theirs.left_at and (mine.unread, mine.unread_exact) == served

    for c in (cu1, cu2):  # as the leave reached each device (its own GroupOk; the mailbox's CONTROL entry)
        await eventually(lambda c=c: agrees(c), what="the device's list agrees with the server's after the leave")
    for c in (cu1, cu2):  # and after a full list pull
        await c.refresh_conversations()
        assert await unread_pair(c, conv) == (served, served)
    await cp.send_text(conv, "after the leave: not for the leaver")
    for c in (cu1, cu2):
        await c.runtime.close()
        await c.connect()  # a new connection's sync
        assert await unread_pair(c, conv) == (served, served)
    await close_all(cp, cu1, cu2)
