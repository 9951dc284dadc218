"""The operator's moderation actions on the session stack (issue 38, what a newcomer
found; docs/decisions/0123 and 0124, Amendments):

- a report is resolved once: two operators resolving it at once give one winner, the
  other (and any later resolve) exits 2 with "report ID already resolved at T by
  OPERATOR: ACTION" and changes nothing (no second log entry, nobody banned);
- the moderation log holds only actions carried out: a mute of an unknown group or of a
  non-member is exit 2 and not logged; a resolution whose action then fails (the writer
  unreachable) is logged with a second `outcome=failed` entry and the report is open again;
- every entry has explicit fields (target_user, reporter, group, report, until_ms in ms)
  and `qimctl moderation log` prints its times as ISO-8601 UTC; an entry of the old shape
  (`user`, `until` in seconds) is still read."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid

from qim.cli.qimctl_moderation_ban import iso_utc
from qim.infra.redis.client import connect
from qim.sdk.events import SendAck
from qim.stores.redis.modlog import LOG_KEY
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_groups import users
from tests.moderation.test_reports import qimctl, until


async def _reported(st, tmp_path, text: str):
    """A direct message of a fresh sender to a fresh member, reported by the member as
    spam -> (sender, member, report_id)."""
    sender, member = users(2)
    a, b = await client(st, tmp_path, sender), await client(st, tmp_path, member)
    try:
        for x in (a, b):
            await x.connect()
        conv = (await a.open_direct(member)).conversation_id
        ack = await a.send_text(conv, text)
        assert isinstance(ack, SendAck)
        await b.open_direct(sender)

        async def has_it() -> bool:
            return any(m.message_id == ack.message_id for m in await b.messages(conv))

        await until(has_it, "the member did not get the message")
        return sender, member, (await b.report(conv, ack.message_id, "spam")).report_id
    finally:
        await close_all(a, b)


async def _log(st, operator: str) -> list[str]:
    out = await asyncio.to_thread(qimctl, st, operator, "moderation", "log", "--count", "2000")
    assert out.returncode == 0, out.stderr
    return [ln for ln in out.stdout.splitlines() if f" {operator} " in ln]


async def test_a_report_is_resolved_once_even_by_two_operators_at_once(stack, tmp_path):
    sender, _, report = await _reported(stack, tmp_path, "twice resolved spam")
    ops = [f"op-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    both = await asyncio.gather(*(asyncio.to_thread(qimctl, stack, op, "moderation", "resolve", report, "--action",
                                                    "none", "--reason", f"seen by {op}") for op in ops[:2]))
    assert sorted(p.returncode for p in both) == [0, 2], [(p.returncode, p.stdout, p.stderr) for p in both]
    winner = ops[[p.returncode for p in both].index(0)]
    loser = next(p for p in both if p.returncode == 2)
    assert f"report {report} already resolved at " in loser.stderr and f" by {winner}: none" in loser.stderr
    late = await asyncio.to_thread(qimctl, stack, ops[2], "moderation", "resolve", report, "--action", "ban",
                                   "--reason", "too late")
    assert late.returncode == 2 and "already resolved at 20" in late.stderr and f"by {winner}: none" in late.stderr
    listed = await asyncio.to_thread(qimctl, stack, ops[2], "moderation", "reports", "--count", "2000")
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(f"{report} at="))
    assert " resolved spam " in line and f"action=none by={winner}" in line
    assert [len(await _log(stack, op)) for op in ops] == [1 if op == winner else 0 for op in ops]
    assert not [ln for ln in await _log(stack, ops[2]) if f"target_user={sender}" in ln]  # nobody banned


async def test_only_actions_carried_out_are_logged_and_a_failed_one_says_so(stack, tmp_path):
    op = f"op-{uuid.uuid4().hex[:8]}"
    owner, outsider = users(2)
    c = await client(stack, tmp_path, owner)
    try:
        await c.connect()
        group_id = int.from_bytes(os.urandom(7), "big") | 1
        await c.create_group([users(1)[0]], group_id=group_id)
    finally:
        await c.close()
    unknown = str(int.from_bytes(os.urandom(7), "big") | 1)
    bad = await asyncio.to_thread(qimctl, stack, op, "moderation", "mute", str(outsider), unknown, "--reason", "x")
    assert bad.returncode == 2 and f"no group {unknown}" in bad.stderr
    bad = await asyncio.to_thread(qimctl, stack, op, "moderation", "mute", str(outsider), str(group_id),
                                  "--reason", "x")
    assert bad.returncode == 2 and f"user {outsider} is not a member of group {group_id}" in bad.stderr
    assert await _log(stack, op) == []  # neither was logged

    _, member, report = await _reported(stack, tmp_path, "remove me later")
    with socket.socket() as s:  # a writer address nobody listens on
        s.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{s.getsockname()[1]}"
    failed = await asyncio.to_thread(qimctl, stack, op, "moderation", "resolve", report, "--action",
                                     "remove-message", "--reason", "spam indeed", "--writer", nowhere)
    assert failed.returncode != 0 and f"report {report} not resolved" in failed.stderr, failed
    mine = await _log(stack, op)
    assert len(mine) == 2 and all(f"report={report} " in ln and f"reporter={member} " in ln for ln in mine), mine
    assert "outcome=failed" in mine[0] and "outcome=" not in mine[1], mine  # newest first
    still = await asyncio.to_thread(qimctl, stack, op, "moderation", "reports", "--open", "--count", "2000")
    line = next(ln for ln in still.stdout.splitlines() if ln.startswith(f"{report} at="))
    assert " open spam " in line  # open again for another try
    done = await asyncio.to_thread(qimctl, stack, op, "moderation", "resolve", report, "--action", "none",
                                   "--reason", "fine after all")
    assert done.returncode == 0, done.stderr


async def test_every_entry_has_explicit_fields_in_ms_printed_as_iso_utc(stack, tmp_path):
    op = f"op-{uuid.uuid4().hex[:8]}"
    victim = users(1)[0]
    end_ms = (int(time.time()) + 3600) * 1000
    banned = await asyncio.to_thread(qimctl, stack, op, "moderation", "ban", str(victim), "--reason", "flood",
                                     "--until", str(end_ms))
    assert banned.returncode == 0, banned.stderr
    sender, member, report = await _reported(stack, tmp_path, "ban the sender")
    resolved = await asyncio.to_thread(qimctl, stack, op, "moderation", "resolve", report, "--action", "ban",
                                       "--reason", "repeat")
    assert resolved.returncode == 0, resolved.stderr
    redis = connect(stack.env["QIM_REDIS_ADDR"])
    try:
        rows = [{k.decode(): v.decode() for k, v in f.items()} for _, f in await redis.xrevrange(LOG_KEY, count=2000)]
        mine = [r for r in rows if r["operator"] == op]
        fields = {"at_ms", "operator", "action", "tenant", "target_user", "reporter", "group", "report", "reason",
                  "until_ms", "outcome", "error"}
        assert all(set(r) == fields for r in mine), mine
        ban = next(r for r in mine if r["action"] == "ban" and r["target_user"] == str(victim))
        assert ban["until_ms"] == str(end_ms) and abs(int(ban["at_ms"]) - time.time() * 1000) < 3_600_000
        res = next(r for r in mine if r["action"] == "resolve-report:ban")
        assert (res["target_user"], res["reporter"], res["report"]) == (str(sender), str(member), report)
        # an entry of the old shape: `user` the reporter of a resolution, `until` in seconds
        old_op = f"old-{uuid.uuid4().hex[:8]}"
        await redis.xadd(LOG_KEY, {"at_ms": "1767225600000", "operator": old_op, "action": "ban", "tenant": "0",
                                   "user": str(victim), "reason": "legacy", "until": "1767312000"})
        await redis.xadd(LOG_KEY, {"at_ms": "1767225600000", "operator": old_op, "action": "resolve-report:none",
                                   "tenant": "0", "user": str(member), "reason": f"report {report}: old", "until": "0"})
    finally:
        await redis.aclose()
    lines = await _log(stack, op)
    assert any(ln.startswith(iso_utc(int(ban["at_ms"]))) and f"target_user={victim} " in ln
               and f"until={iso_utc(end_ms)} " in ln for ln in lines), lines
    old = await _log(stack, old_op)
    assert old[0].startswith("2026-01-01T00:00:00.000Z ") and f"reporter={member} " in old[0], old
    assert f"report={report} " in old[0] and "target_user" not in old[0], old
    assert f"target_user={victim} " in old[1] and "until=2026-01-02T00:00:00.000Z " in old[1], old
