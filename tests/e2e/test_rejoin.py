"""A member who leaves and re-joins keeps both memberships (docs/design.md
§7: "History, unread and heads outside every interval are invisible; a leaver still
reads what came before leaving").

B is removed and later re-added by the admin plane (so its read position stays 0: an
operator's CONTROL messages do not mark B's reads). B then sees period 1 and period 2,
never the gap, in history pages of both directions (pages crossing the gap neither drop
nor leak), in its session head and in unread.
"""

from __future__ import annotations

import random

from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.sessionclient import entry_when, mark_read
from tests.e2e.test_groups import CONTROL, create, gconv, gsend, history, qimctl, users


async def pages(client: RawClient, conv: bytes, newer: bool, anchor: int = 0, limit: int = 2) -> list:
    """Every HistoryItem from `anchor` on in one direction, `limit` per page."""
    items = []
    while True:
        op, page = await history(client, conv, anchor=anchor, newer=newer, limit=limit)
        assert op == Opcode.HISTORY_BATCH, page
        assert len(page.items) <= limit
        items.extend(page.items)
        if not page.has_more:
            return items
        anchor = page.next_anchor


async def test_a_rejoined_member_sees_both_memberships_and_never_the_gap(stack):
    a, b = users(2)
    gid = random.getrandbits(62) + 1
    conv = gconv(gid)
    ca, cb = await RawClient.login(stack, a), await RawClient.login(stack, b)
    op, made = await create(ca, gid, [b])
    assert op == Opcode.GROUP_OK
    period1 = [(await gsend(ca, gid, b"period 1 #%d" % i))[1] for i in range(3)]
    removed = qimctl(stack, "membership", "remove", "--group", str(gid), "--user", str(b))
    assert removed.returncode == 0, removed.stdout + removed.stderr
    gap = [(await gsend(ca, gid, b"gap #%d" % i))[1] for i in range(3)]
    added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(b))
    assert added.returncode == 0, added.stdout + added.stderr
    period2 = [(await gsend(ca, gid, b"period 2 #%d" % i))[1] for i in range(2)]
    gap_seqs = {ack.conversation_seq for ack in gap}
    left_at = period1[-1].conversation_seq + 1  # the REMOVED control message
    joined_at = gap[-1].conversation_seq  # the JOINED message is joined_at + 1

    want = [b"period 1 #0", b"period 1 #1", b"period 1 #2", b"period 2 #0", b"period 2 #1"]
    newer = await pages(cb, conv, newer=True)
    assert [i.body for i in newer if i.message_type != CONTROL] == want
    seqs = [i.conversation_seq for i in newer]
    assert seqs == sorted(seqs) and not gap_seqs & set(seqs)
    assert seqs[0] == made.conversation_seq and left_at in seqs and joined_at + 1 in seqs
    older = await pages(cb, conv, newer=False)
    assert [i.conversation_seq for i in older] == list(reversed(seqs))  # the same items, newest first
    # anchors inside the gap page to the nearest visible messages on either side
    op, page = await history(cb, conv, anchor=min(gap_seqs), newer=True, limit=1)
    assert [i.conversation_seq for i in page.items] == [joined_at + 1] and page.has_more
    op, page = await history(cb, conv, anchor=max(gap_seqs), newer=False, limit=1)
    assert [i.conversation_seq for i in page.items] == [left_at] and page.has_more
    op, page = await history(ca, conv, newer=False, limit=50)  # a member all along sees the gap
    assert gap_seqs <= {i.conversation_seq for i in page.items}

    # session list: head from period 2; unread counts both periods, never the gap
    e = await entry_when(cb, conv, lambda e: e.last_message.conversation_seq == period2[-1].conversation_seq)
    assert e.unread == 5 and e.unread_exact and e.read_conversation_seq == 0
    assert (e.joined_at, e.left_at) == (joined_at, 0)  # the current interval
    op, ok = await mark_read(cb, conv, period1[1].conversation_seq)
    assert op == Opcode.MARK_READ_OK
    e = await entry_when(cb, conv, lambda e: e.read_conversation_seq == period1[1].conversation_seq)
    assert e.unread == 3  # period 1 #2 and both of period 2
    op, ok = await mark_read(cb, conv, 10 ** 9)  # clamped to the newest visible message
    assert ok.read_conversation_seq == period2[-1].conversation_seq
    await entry_when(cb, conv, lambda e: e.unread == 0)

    # B leaves again: what it saw stays visible, the newest messages do not
    removed = qimctl(stack, "membership", "remove", "--group", str(gid), "--user", str(b))
    assert removed.returncode == 0, removed.stdout + removed.stderr
    _, after = await gsend(ca, gid, b"after the second leave")
    op, page = await history(cb, conv, newer=False, limit=50)
    bodies = [i.body for i in page.items if i.message_type != CONTROL]
    assert bodies == list(reversed(want)) and after.conversation_seq not in {i.conversation_seq for i in page.items}
    await ca.close(), await cb.close()
