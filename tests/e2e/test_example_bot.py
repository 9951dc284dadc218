"""examples/echo_bot.py as a person runs it (docs/sdk.md "A long-running bot"): started
with --user in its own process, it answers what another user writes, never answers its
own messages (not even those sent from another device of the bot), and Ctrl+C (SIGINT)
or SIGTERM stops it with exit 0, a last line saying so and no traceback."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from tests.e2e.docrun import ROOT, client_env
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users


def bodies(c, conv) -> list[bytes]:
    return [m.body for m in c.store.messages(conv)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_the_bot_answers_others_skips_its_own_and_stops_on_a_signal(stack, tmp_path, sig):
    bot_id, friend_id = users(2)
    env = client_env(stack, QIM_DATA_DIR=str(tmp_path / "bot"), PYTHONUNBUFFERED="1")
    proc = await asyncio.create_subprocess_exec(sys.executable, str(ROOT / "examples" / "echo_bot.py"), "--user",
                                                str(bot_id), env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    friend = await client(stack, tmp_path, friend_id)
    other_device = await client(stack, tmp_path, bot_id, device=2)  # the bot's own user on another device
    try:
        await friend.connect()
        await other_device.connect()
        chat = (await friend.open_direct(bot_id)).conversation_id
        await friend.send_text(chat, "ping 1")
        await other_device.open_direct(friend_id)
        await other_device.send_text(chat, "from the bot's other device")
        await friend.send_text(chat, "ping 2")
        await eventually(lambda: bodies(friend, chat).count(b"echo: ping 2") == 1, timeout=60,
                         what="the bot answered the friend")
        # the bot handles the conversation in order and its sends leave in order: an answer to
        # its own message (between the two pings) would be stored before "echo: ping 2"
        seen = bodies(friend, chat)
        assert seen.count(b"echo: ping 1") == 1 and seen.count(b"echo: ping 2") == 1, seen
        assert not any(b.startswith(b"echo: from the bot") for b in seen), "answered its own message"
        proc.send_signal(sig)
        raw_out, raw_err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await close_all(friend, other_device)
    out, err = raw_out.decode(), raw_err.decode()
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err and err.strip() == "", err
    assert out.strip().splitlines()[-1] == f"bot: stopped by {sig.name}", out
