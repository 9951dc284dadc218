"""`qimctl moderation ban|unban|log` on the session stack (issue 38; docs/decisions/0123
item 6, Amendment 2): a ban closes the user's open connection with KICKED{BANNED}
carrying the operator's reason and the end within BAN_WITHIN_S (qim.sdk stops with
ConnectionState "kicked" "banned …: reason", a KickedEvent with both, and does not
reconnect), refuses a login with a token issued after the ban (ERROR BANNED with
until_ms; qim.sdk's connect() raises Banned) and a send on a connection opened before
it; unban lets a token issued afterwards in; both actions are in the moderation log
with their reasons; a bad --until is exit 2 with its reason."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from qim.cli import qimctl
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client
from tests.e2e.test_groups import users
from tests.ops.test_tokens import _auth, _eventually

BAN_WITHIN_S = 5.0  # docs/operations.md "Moderation: bans": within seconds


def ctl(st, *argv: str) -> int:
    """qimctl in this process against the stack's Redis (a fresh operator name per run)."""
    return qimctl.main([*argv, "--redis-addr", st.env["QIM_REDIS_ADDR"]])


async def test_a_ban_kicks_refuses_logins_and_sends_until_unbanned(stack, tmp_path, capsys, monkeypatch):
    st = stack
    operator = f"op-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("QIM_OPERATOR", operator)
    user, peer = users(2)
    app = await client(st, tmp_path, user, device=1)
    raw = await RawClient.login(st, user, device=2)  # a connection opened before the ban
    reason = f"spam {os.urandom(4).hex()}"
    try:
        await app.connect()
        assert app.runtime.state == "ready"
        assert await asyncio.to_thread(ctl, st, "moderation", "ban", str(user), "--reason", reason) == 0
        t0 = time.monotonic()

        async def cut():
            return app.runtime.state == "kicked"

        await _eventually(cut, BAN_WITHIN_S, "the banned user's connection was not closed in time")
        assert app.told.of(ev.KickedEvent)[-1:] == [ev.KickedEvent(connection_pb2.Kicked.BANNED, reason, 0)]
        assert app.told.of(ev.ConnectionState)[-1].reason == f"banned by a moderator: {reason}"
        assert time.monotonic() - t0 < BAN_WITHIN_S
        # a send on a connection the kick has not reached yet is refused at commit (decision 0080);
        # a connection already closed by the kick is just as good: nothing is sent
        try:
            op, reply = await raw.send_text(peer, b"after the ban")
            sent = op == Opcode.SEND_ACK
        except AssertionError as exc:  # rawclient's "connection closed": the kick came first
            assert "connection closed" in str(exc)
            sent = False
        assert not sent
        await asyncio.sleep(1.1)  # a token issued after the ban's start: refused all the same
        op, err = await _auth(st, issue_dev_token(st.token_key, 0, user, 3))
        assert op == Opcode.ERROR and (err.code, err.message, err.until_ms) == (
            common_pb2.BANNED, f"banned by a moderator: {reason}", 0)
        assert app.runtime.state == "kicked"  # stopped for the ban: no reconnect since

        assert await asyncio.to_thread(ctl, st, "moderation", "unban", str(user), "--reason", "appeal granted") == 0
        await asyncio.sleep(1.1)  # tokens issued after the unban second are accepted
        op, _ = await _auth(st, issue_dev_token(st.token_key, 0, user, 3))
        assert op == Opcode.AUTH_OK
        capsys.readouterr()
        assert await asyncio.to_thread(ctl, st, "moderation", "log", "--count", "200") == 0
        mine = [ln for ln in capsys.readouterr().out.splitlines() if f" {operator} " in ln and f"target_user={user} " in ln]
        assert len(mine) == 2 and " unban " in mine[0] and "appeal granted" in mine[0], mine
        assert " ban " in mine[1] and reason in mine[1], mine
    finally:
        await app.close()
        await raw.close()


def test_a_ban_with_a_past_end_is_refused(stack, capsys):
    assert ctl(stack, "moderation", "ban", "5", "--reason", "x", "--until", "2001-01-01T00:00:00Z") == 2
    assert "--until '2001-01-01T00:00:00Z' is not in the future" in capsys.readouterr().err


async def test_a_timed_ban_reaches_the_device_as_a_ban_with_its_end(stack, tmp_path, monkeypatch):
    """The ban's end and reason (Chinese) reach qim.sdk on the open connection and at the
    next login; qim-desktop prints "banned until …: reason"; the runtime stays stopped."""
    from qim.desktop.render import kicked_words
    from qim.sdk import Banned

    monkeypatch.setenv("QIM_OPERATOR", f"op-{uuid.uuid4().hex[:8]}")
    user = users(1)[0]
    end_ms = (int(time.time()) + 7200) * 1000
    reason = f"广告 spam {os.urandom(3).hex()}"
    app = await client(stack, tmp_path, user, device=1)
    later = await client(stack, tmp_path, user, device=2)
    try:
        await app.connect()
        assert await asyncio.to_thread(ctl, stack, "moderation", "ban", str(user), "--reason", reason,
                                       "--until", str(end_ms)) == 0

        async def cut():
            return app.runtime.state == "kicked"

        await _eventually(cut, BAN_WITHIN_S, "the banned user's connection was not closed in time")
        kicked = app.told.of(ev.KickedEvent)[-1]
        assert (kicked.reason, kicked.message, kicked.until_ms) == (connection_pb2.Kicked.BANNED, reason, end_ms)
        words = app.told.of(ev.ConnectionState)[-1].reason
        assert words.startswith("banned until 20") and words.endswith(f" UTC: {reason}"), words
        assert kicked_words(words) == words  # what qim-desktop prints when it stops
        try:
            await later.connect()
            raise AssertionError("a banned user's login was accepted")
        except Banned as refused:
            assert (refused.reason, refused.until_ms, refused.message) == (reason, end_ms, words)
        assert later.runtime.state == "offline" and later.told.of(ev.ConnectionState)[-1].reason == words
        await asyncio.sleep(3)  # neither tries again by itself
        assert (app.runtime.state, later.runtime.state) == ("kicked", "offline")
    finally:
        await app.close()
        await later.close()
        assert await asyncio.to_thread(ctl, stack, "moderation", "unban", str(user), "--reason", "test over") == 0
