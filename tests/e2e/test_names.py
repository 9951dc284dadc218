"""Names a person can read, through the public SDK against the real stack:
a group's title set at creation and changed by its owner (a CONTROL notice, never
unread) in every member's list and the server's session list; a user's display name
from its token's `name` claim, learnt by anyone by user id (PULL_PROFILES); bad titles
and bad profile requests refused with the request's error. Ids stay the keys."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import group_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk import IdError, SendRefused, ServerError
from tests.e2e.sdkclient import client, close_all, server_list
from tests.sdk.realstack import eventually, users


async def test_display_names_come_from_the_token_and_are_asked_by_id(stack, tmp_path):
    a, b, c = users(3)
    alice = await client(stack, tmp_path, a, display_name="Alice  Liddell")  # whitespace folds to one space
    bob = await client(stack, tmp_path, b, display_name="鲍勃 🙂")
    nobody = await client(stack, tmp_path, c)
    for x in (alice, bob, nobody):
        await x.connect()  # the session list pull after the login keeps the name
    assert alice.display_name == "Alice Liddell" and nobody.display_name == ""
    await eventually(lambda: bob.display_names([a, c]), what="names answered")
    assert await bob.display_names([a, c, b]) == {a: "Alice Liddell", c: "", b: "鲍勃 🙂"}
    await bob.runtime.close()  # offline, the store still holds what was learnt
    assert not bob.connected and (await bob.display_names([a]))[a] == "Alice Liddell"
    _, body = await alice.runtime.request(Opcode.PULL_PROFILES, session_pb2.PullProfiles(user_ids=[b]).SerializeToString())
    assert [(p.user_id, p.display_name) for p in session_pb2.ProfilesBatch.FromString(body).profiles] == [(b, "鲍勃 🙂")]
    for bad in ([], list(range(1, 202)), [0]):
        with pytest.raises(ServerError) as err:
            await alice.runtime.request(Opcode.PULL_PROFILES, session_pb2.PullProfiles(user_ids=bad).SerializeToString())
        assert err.value.code == ErrorCode.INVALID_ARGUMENT
    await close_all(alice, nobody, bob)


async def test_group_title_at_creation_and_by_its_owner_reaches_every_list_without_unread(stack, tmp_path):
    a, b, c = users(3)
    owner = await client(stack, tmp_path, a)
    member = await client(stack, tmp_path, b)
    late = await client(stack, tmp_path, c)
    for x in (owner, member, late):
        await x.connect()
    group = await owner.create_group([b, c], title="周末 hiking 🥾")
    assert group.title == "周末 hiking 🥾"
    conv = group.conversation_id

    async def member_title(x) -> str:
        entry = await x.conversation(conv)
        return entry.title if entry else ""

    await eventually(lambda: member_title(member), what="the member's list has the group")
    assert await member_title(member) == "周末 hiking 🥾"
    renamed = await owner.set_group_title(group.group_id, "Saturday hike")
    assert renamed.title == "Saturday hike"

    async def renamed_for(x) -> bool:
        return await member_title(x) == "Saturday hike"

    await eventually(lambda: renamed_for(member), what="the member's list shows the new title")
    entry = await member.conversation(conv)
    assert entry.unread == 0 and entry.unread_exact, "title notices are never unread"
    assert (await server_list(member))[conv].group_title == "Saturday hike"
    assert (await server_list(member))[conv].unread == 0
    fresh = await client(stack, tmp_path, c, 2)  # another device of a member: the list pull brings the title
    await fresh.connect()
    await eventually(lambda: renamed_for(fresh), what="a new device's list has the title")
    with pytest.raises(ServerError) as err:
        await member.set_group_title(group.group_id, "mine now")
    assert err.value.code == ErrorCode.FORBIDDEN
    for title, code in ((" padded ", ErrorCode.INVALID_ARGUMENT), ("bell\x07", ErrorCode.INVALID_ARGUMENT),
                        ("长" * 22, ErrorCode.PAYLOAD_TOO_LARGE)):
        body = group_pb2.SetGroupTitle(group_id=group.group_id, title=title, client_message_id=b"\x01" * 16)
        with pytest.raises(ServerError) as err:
            await owner.runtime.request(Opcode.SET_GROUP_TITLE, body.SerializeToString())
        assert err.value.code == code, title
    assert await member_title(member) == "Saturday hike"
    await close_all(owner, member, late, fresh)


async def test_a_bad_conversation_is_a_refused_send(stack, tmp_path):
    a, = users(1)
    c = await client(stack, tmp_path, a)
    await c.connect()
    for bad in (b"\x00" * 16, b"\x07" + b"x" * 15, b"short"):
        with pytest.raises(SendRefused) as err:
            await c.send_text(bad, "hi")
        assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert issubclass(IdError, ValueError)  # exported for the id errors of the other calls
    await close_all(c)


async def test_qimctl_group_create_takes_a_title(stack, tmp_path):
    import os

    from tests.e2e.test_desktop_cli import run
    owner, member = users(2)
    c = await client(stack, tmp_path, member)
    await c.connect()
    gid = int.from_bytes(os.urandom(7), "big") + 1
    made = run("qimctl", "group", "create", "--group", str(gid), "--owner", str(owner), "--members", str(member),
               "--title", "运维 on-call", env_extra=stack.client_env())
    assert made.returncode == 0, made.stdout + made.stderr

    async def titled() -> bool:
        return any(x.group_id == gid and x.title == "运维 on-call" for x in await c.conversations())

    await eventually(titled, what="the member's list has the titled group")
    await close_all(c)


async def test_a_peer_asked_about_before_its_first_login_is_named_once_it_logged_in(stack, tmp_path, monkeypatch):
    """The server learns a name at the user's first login. An empty answer before that is
    not kept for the whole profile TTL: asked again after EMPTY_RETRY_S (shortened here),
    the name shows (two terminal clients started together showed a user id for good)."""
    from qim.sdk import names

    monkeypatch.setattr(names, "EMPTY_RETRY_S", 0.5)
    a, b = users(2)
    bob = await client(stack, tmp_path, b, display_name="Bob")
    await bob.connect()
    assert await bob.display_names([a]) == {a: ""}  # alice never logged in
    alice = await client(stack, tmp_path, a, display_name="Alice")
    await alice.connect()

    async def alice_named():
        return (await bob.display_names([a]))[a] == "Alice"

    await eventually(alice_named, what="alice's name after her first login")
    await close_all(alice, bob)
