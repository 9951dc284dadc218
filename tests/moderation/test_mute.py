"""`qimctl moderation mute|unmute|mutes` on the session stack (issue 38; docs/decisions/
0127-group-mute.md): a muted member's group send and edit are refused with the SDK's typed
PolicyRefused carrying the mute's reason (Chinese text included), and so is a reaction; it still reads the
group's history and receives the others' messages; the mute is listed; unmute lets the
next send commit; a mute with an end ends by itself; every action is in the moderation
log with the operator's name and the group; bad input is exit 2 with its reason."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from qim.cli import qimctl
from qim.cli.qimctl_moderation_ban import iso_utc
from qim.sdk import PolicyRefused, requests
from tests.e2e.sdkclient import client
from tests.e2e.test_groups import users

DEADLINE_S = 60.0  # a busy 2-core machine: generous, polled
EXPIRES_S = 8  # the end of the timed mute, from when it is written


def ctl(st, *argv: str) -> int:
    """qimctl in this process against the stack's Redis."""
    return qimctl.main([*argv, "--redis-addr", st.env["QIM_REDIS_ADDR"]])


async def until(cond, what: str) -> None:
    """Poll `cond()` (a coroutine function) until true within DEADLINE_S; fail naming `what`."""
    end = time.monotonic() + DEADLINE_S
    while not await cond():
        if time.monotonic() > end:
            pytest.fail(f"not within {DEADLINE_S}s: {what}")
        await asyncio.sleep(0.3)


async def test_a_muted_member_reads_but_cannot_send_until_unmuted_or_the_end(stack, tmp_path, capsys, monkeypatch):
    st = stack
    operator = f"op-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("QIM_OPERATOR", operator)
    owner, muted = users(2)
    group_id = int.from_bytes(os.urandom(7), "big") | 1
    a = await client(st, tmp_path, owner)
    b = await client(st, tmp_path, muted)
    reason = f"广告刷屏 spam {os.urandom(3).hex()}"
    try:
        await a.connect()
        await b.connect()
        conv = (await a.create_group([muted], group_id=group_id)).conversation_id
        own = await b.send_text(conv, "before the mute")
        assert (
            await asyncio.to_thread(ctl, st, "moderation", "mute", str(muted), str(group_id), "--reason", reason) == 0
        )
        assert "muted: user" in capsys.readouterr().out

        with pytest.raises(PolicyRefused) as refused:
            await b.send_text(conv, "while muted")
        assert reason in refused.value.message and "muted in this group" in refused.value.message
        with pytest.raises(PolicyRefused) as edit:
            await b.edit(conv, own.message_id, "edited while muted")
        assert reason in edit.value.message
        with pytest.raises(PolicyRefused) as react:
            await b.reactions.add(conv, own.message_id, "👍")
        assert reason in react.value.message

        # still reads (a PULL_HISTORY from the server, not the local store) and receives
        seen = await a.send_text(conv, "the owner speaks")
        page = await requests.pull_history(b.runtime, conv)
        assert seen.message_id in [item.message_id for item in page.items]

        async def received() -> bool:
            return any(m.message_id == seen.message_id for m in await b.messages(conv))

        await until(received, "the muted member did not receive the owner's message")
        assert await asyncio.to_thread(ctl, st, "moderation", "mutes", str(group_id)) == 0
        listed = capsys.readouterr().out
        assert f"group={group_id} user={muted} " in listed and "until=unmuted" in listed and operator in listed

        assert (
            await asyncio.to_thread(
                ctl, st, "moderation", "unmute", str(muted), str(group_id), "--reason", "appeal granted"
            )
            == 0
        )
        assert (await b.send_text(conv, "after the unmute")).conversation_seq > seen.conversation_seq
        assert (await b.reactions.add(conv, own.message_id, "👍")).counts == (("👍", 1, True),)

        end_ms = int(time.time() * 1000) + EXPIRES_S * 1000
        assert (
            await asyncio.to_thread(
                ctl,
                st,
                "moderation",
                "mute",
                str(muted),
                str(group_id),
                "--reason",
                "cool down",
                "--until",
                str(end_ms),
            )
            == 0
        )
        with pytest.raises(PolicyRefused) as timed:
            await b.send_text(conv, "inside the timed mute")
        assert "cool down" in timed.value.message and " UTC" in timed.value.message
        await asyncio.sleep(max(0.0, end_ms / 1000 - time.time()) + 0.5)  # the end is Redis's clock: same host

        async def sends() -> bool:
            try:
                await b.send_text(conv, "after the end")
                return True
            except PolicyRefused:
                return False

        await until(sends, "the timed mute did not end by itself")
        capsys.readouterr()
        assert await asyncio.to_thread(ctl, st, "moderation", "mutes", str(group_id)) == 0
        assert "no mutes in force" in capsys.readouterr().out  # the ended one is not listed

        assert await asyncio.to_thread(ctl, st, "moderation", "log", "--count", "500") == 0
        mine = [ln for ln in capsys.readouterr().out.splitlines() if f" {operator} " in ln]
        assert [ln.split()[2] for ln in mine] == ["mute", "unmute", "mute"], mine
        assert all(f"target_user={muted} " in ln and f"group={group_id}" in ln for ln in mine), mine
        assert "cool down" in mine[0] and f"until={iso_utc(end_ms)} " in mine[0]  # ms, printed ISO-8601 UTC
        assert "appeal granted" in mine[1] and reason in mine[2]
    finally:
        await a.close()
        await b.close()


def test_a_mute_in_no_group_or_with_a_past_end_is_refused(stack, capsys):
    group_id = str(int.from_bytes(os.urandom(7), "big") | 1)
    assert ctl(stack, "moderation", "mute", "5", group_id, "--reason", "x") == 2
    assert f"no group {group_id}" in capsys.readouterr().err
    assert ctl(stack, "moderation", "mute", "5", group_id, "--reason", "x", "--until", "2001-01-01T00:00:00Z") == 2
    assert "is not in the future" in capsys.readouterr().err
    assert ctl(stack, "moderation", "mute", "5", group_id, "--reason", "two\nlines") == 2
    assert "one line" in capsys.readouterr().err
