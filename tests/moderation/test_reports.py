"""User reports end to end (issue 38; docs/decisions/0124-user-reports.md): a private
stack with one ModerationService node delivering to a real local receiver
(tests/moderation/receiver.py).

- A member reports a message through qim.sdk: REPORT_OK with an id; the same
  client_report_id again is stored once (same id, duplicate); a non-member is refused
  FORBIDDEN, a message of another conversation NOT_FOUND, an unknown reason and text over
  1,000 bytes are refused before anything is sent.
- The receiver gets the report, signed, with its reason, text and the message's sender.
- `qimctl moderation reports --open` lists it; `resolve --action remove-message` deletes
  the message (the members' copies lose their body), the report is no longer open and the
  resolution is in the moderation log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import pytest

from qim.errors import ErrorCode
from qim.sdk.events import SendAck, ServerError
from tests.e2e.sdkclient import client
from tests.e2e.test_groups import users
from tests.fixtures import running_stack
from tests.moderation.receiver import SECRET, Receiver

DEADLINE_S = 120.0
DELETED = 2  # MessageState DELETED


@pytest.fixture(scope="module")
def receiver():
    """The receiver the ModerationService POSTs reports to."""
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def report_stack(tmp_path_factory, receiver):
    """A stack with one qim-moderation node delivering to `receiver`."""
    env = {"QIM_MODERATION_NOTIFY_URL": receiver.url, "QIM_MODERATION_NOTIFY_SECRET": SECRET}
    with running_stack(tmp_path_factory.mktemp("reports"), extra_env=env, nodes={"moderation": 1}) as st:
        yield st


def qimctl(st, operator: str, *args: str) -> subprocess.CompletedProcess:
    """qimctl in a process of its own with the stack's client environment."""
    env = {**os.environ, **st.client_env(), "QIM_REDIS_ADDR": st.env["QIM_REDIS_ADDR"], "QIM_OPERATOR": operator}
    return subprocess.run(
        [sys.executable, "-m", "qim.cli.qimctl", *args], env=env, capture_output=True, text=True, timeout=60
    )


async def until(cond, what: str) -> None:
    """Poll the coroutine function `cond()` until true within DEADLINE_S; fail naming `what`."""
    end = time.monotonic() + DEADLINE_S
    while not await cond():
        if time.monotonic() > end:
            pytest.fail(f"not within {DEADLINE_S}s: {what}")
        await asyncio.sleep(0.5)


async def test_a_member_reports_the_operator_gets_it_and_removes_the_message(report_stack, receiver, tmp_path):
    st = report_stack
    sender, member, stranger = users(3)
    a = await client(st, tmp_path, sender)
    b = await client(st, tmp_path, member)
    c = await client(st, tmp_path, stranger)
    operator = f"op-{uuid.uuid4().hex[:8]}"
    try:
        for x in (a, b, c):
            await x.connect()
        conv = (await a.open_direct(member)).conversation_id
        ack = await a.send_text(conv, "buy cheap watches")
        assert isinstance(ack, SendAck)
        await b.open_direct(sender)

        async def b_has_it() -> bool:
            return any(m.message_id == ack.message_id for m in await b.messages(conv))

        await until(b_has_it, "the member did not get the message")

        receiver.down = True  # answers 503: the report must be kept and posted again
        posts_before = receiver.posts
        first = await b.report(conv, ack.message_id, "spam", "the third one today")
        assert first.report_id and not first.duplicate
        again = await b.report(conv, ack.message_id, "spam", "the third one today", first.client_report_id)
        assert (again.report_id, again.duplicate) == (first.report_id, True)

        with pytest.raises(ServerError) as refused:  # not a participant of a's and b's conversation
            await c.report(conv, ack.message_id, "abuse")
        assert refused.value.code == ErrorCode.FORBIDDEN
        with pytest.raises(ServerError) as missing:  # no such message in this conversation
            await b.report(conv, os.urandom(16), "other")
        assert missing.value.code == ErrorCode.NOT_FOUND
        with pytest.raises(ValueError):
            await b.report(conv, ack.message_id, "boring")
        with pytest.raises(ValueError):
            await b.report(conv, ack.message_id, "other", "x" * 1001)

        async def refused_once() -> bool:
            return receiver.posts > posts_before

        await until(refused_once, "the ModerationService did not post the report")
        assert not any(r["report_id"] == first.report_id for r in list(receiver.reports))
        receiver.down = False

        async def delivered() -> bool:
            return any(r["report_id"] == first.report_id for r in list(receiver.reports))

        await until(delivered, "the receiver did not get the report")
        mine = [r for r in list(receiver.reports) if r["report_id"] == first.report_id]
        assert mine[0]["reason"] == "spam" and mine[0]["text"] == "the third one today"
        assert mine[0]["sender"] == str(sender) and mine[0]["reporter"] == str(member)
        assert mine[0]["message_id"] == ack.message_id.hex() and receiver.bad_signatures == 0
        # stored once: no other report of this message by b reached the receiver
        assert {r["report_id"] for r in receiver.reports if r["message_id"] == ack.message_id.hex()} == {
            first.report_id
        }

        listed = await asyncio.to_thread(qimctl, st, operator, "moderation", "reports", "--open", "--count", "500")
        assert listed.returncode == 0, listed.stderr
        line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(f"{first.report_id} "))
        at = line.split()[1]  # when it was reported, ISO-8601 UTC, beside the id resolve takes
        assert at.startswith("at=") and at.endswith("Z"), line
        made = datetime.fromisoformat(at[3:-1]).replace(tzinfo=timezone.utc)
        assert abs((datetime.now(timezone.utc) - made).total_seconds()) < 600, line
        assert f"{at} open spam reporter={member}" in line

        done = await asyncio.to_thread(
            qimctl,
            st,
            operator,
            "moderation",
            "resolve",
            first.report_id,
            "--action",
            "remove-message",
            "--reason",
            "confirmed spam",
        )
        assert done.returncode == 0, done.stderr + done.stdout
        assert f"resolved: report {first.report_id} action=remove-message" in done.stdout

        async def gone_for(x) -> bool:
            found = [m for m in await x.messages(conv) if m.message_id == ack.message_id]
            return bool(found) and found[0].state == DELETED and found[0].body == b""

        await until(lambda: gone_for(b), "the message was not removed for the reporter")
        await until(lambda: gone_for(a), "the message was not removed for the sender")

        still = await asyncio.to_thread(qimctl, st, operator, "moderation", "reports", "--open", "--count", "500")
        assert still.returncode == 0 and first.report_id not in still.stdout
        log = await asyncio.to_thread(qimctl, st, operator, "moderation", "log", "--count", "500")
        assert any(
            f" {operator} resolve-report:remove-message " in ln and first.report_id in ln
            for ln in log.stdout.splitlines()
        ), log.stdout

        # a second message reported and resolved with a ban of its sender, logged
        ack2 = await a.send_text(conv, "and again")
        assert isinstance(ack2, SendAck)

        async def b_has_the_second() -> bool:
            return any(m.message_id == ack2.message_id for m in await b.messages(conv))

        await until(b_has_the_second, "the member did not get the second message")
        second = await b.report(conv, ack2.message_id, "abuse")
        banned = await asyncio.to_thread(
            qimctl, st, operator, "moderation", "resolve", second.report_id, "--action", "ban", "--reason", "repeat"
        )
        assert banned.returncode == 0, banned.stderr + banned.stdout
        log = await asyncio.to_thread(qimctl, st, operator, "moderation", "log", "--count", "500")
        mine = [ln for ln in log.stdout.splitlines() if f" {operator} " in ln]
        assert any(" resolve-report:ban " in ln and f"target_user={sender} " in ln for ln in mine), mine
        assert any(" ban " in ln and f"target_user={sender} " in ln and f"report={second.report_id} " in ln
                   for ln in mine), mine
    finally:
        receiver.down = False
        for x in (a, b, c):
            await x.close()


def test_resolving_an_unknown_report_is_exit_2(report_stack):
    out = qimctl(report_stack, "op-x", "moderation", "resolve", "1-0", "--action", "none", "--reason", "x")
    assert out.returncode == 2 and "no report '1-0'" in out.stderr


async def test_desktop_report_reaches_the_operator(report_stack, receiver, tmp_path):
    """qim-desktop `/report [N] REASON [TEXT]`: the newest message is reported through the
    SDK and the receiver gets it; a reason it does not know is refused in the composer."""
    from qim.desktop.app import ChatApp
    from tests.desktop.pilotkit import enter
    from tests.sdk.realstack import eventually

    st = report_stack
    me, bob = users(2)
    cb = await client(st, tmp_path, bob)
    desk = await client(st, tmp_path, me, name="-desktop", event_queue=True, on_event=None)
    try:
        await cb.connect()
        await desk.connect()
        chat = (await cb.open_direct(me)).conversation_id
        sent = await cb.send_text(chat, "rude words")
        assert isinstance(sent, SendAck)
        app = ChatApp(desk, bob)  # opens the chat with bob
        async with app.run_test(size=(120, 36)) as pilot:
            await eventually(lambda: "rude words" in app.transcript_text(), what="the message shown")
            await enter(pilot, app, "/report boring")
            await eventually(lambda: "usage: /report" in app.notice_text(), what="the refusal")
            await enter(pilot, app, "/report abuse said twice")
            await eventually(
                lambda: 'reported "rude words" to the operator as abuse' in app.notice_text(),
                what="the report's notice",
            )
        await until(
            lambda: _reported(receiver, sent.message_id.hex(), str(me)), "the receiver did not get the desktop report"
        )
        got = [r for r in list(receiver.reports) if r["message_id"] == sent.message_id.hex()]
        assert got[0]["reason"] == "abuse" and got[0]["text"] == "said twice"
    finally:
        await cb.close()
        await desk.close()


async def _reported(receiver, message_id: str, reporter: str) -> bool:
    return any(r["message_id"] == message_id and r["reporter"] == reporter for r in list(receiver.reports))
