"""Inline pushes (docs/decisions/0156) attacked at their worst moments on the real stack.

A user with three devices (one going offline and back, one reconnecting) in several
direct conversations at once, both sides sending fast: every device ends with every
message exactly once and in order, the same unread counts, and the same store as a
fresh device's full sync. A burst of more inline pushes than the SDK's queue holds
(INLINE_QUEUE_MAX): the dropped ones are pulled. A recall and an edit right after a
message a device applied inline reach it; a reply with a mention (its body referenced:
never inlined) keeps its reply and mention, bodies around INLINE_MAX_BYTES at UTF-8
boundaries arrive whole, a reaction right after reaches the device that applied the
message inline and rides a later device's pull; a user writing to itself gets each
message once on both of its devices. Each test prints (pushes applied, pages pulled).
"""

from __future__ import annotations

import asyncio
import os
import random

from qim.sdk.puller import INLINE_QUEUE_MAX
from tests.e2e.sdkclient import client, close_all
from tests.sdk.faultproxy import FaultProxy
from tests.sdk.realstack import eventually, users

PEERS = 3
PER_SIDE = 30  # messages each side sends in each conversation


async def store_view(c, conv: bytes) -> list[tuple]:
    """The conversation as the device's store holds it: (seq, sender, body, state)."""
    rows = await c.store.run(c.store.messages, conv)
    return [(m.conversation_seq, m.sender_id, m.body, m.state) for m in rows]


def told_once(c, conv: bytes) -> bool:
    """Every message the app was told of in `conv` told once, in conversation_seq order."""
    told = c.told.messages(conv)
    seqs = [m.conversation_seq for m in told]
    return len(set(m.message_id for m in told)) == len(told) and seqs == sorted(seqs)


async def _sender(c, conv: bytes, tag: str, n: int) -> None:
    for i in range(n):  # pipelined, with small random gaps so both sides interleave
        await c.send_text(conv, f"{tag} {i}", wait=False)
        await asyncio.sleep(random.random() * 0.02)


async def test_three_devices_in_several_conversations_end_equal_to_a_fresh_sync(stack, tmp_path):
    me, *peers = users(1 + PEERS)
    d1 = await client(stack, tmp_path, me, 1)
    d2 = await client(stack, tmp_path, me, 2)
    d3 = await client(stack, tmp_path, me, 3)
    others = [await client(stack, tmp_path, p, 1) for p in peers]
    for c in (d1, d2, d3, *others):
        await c.connect()
    convs = [(await d1.open_direct(p)).conversation_id for p in peers]
    for c in (d2, d3):
        for p in peers:
            await c.open_direct(p)
    for o in others:
        await o.open_direct(me)

    mine = [d1, d2, d3]

    async def churn() -> None:  # d3 offline part of the time, back on the same store
        for _ in range(4):
            await asyncio.sleep(0.3)
            await mine[2].close()
            await asyncio.sleep(0.4)
            mine[2] = await client(stack, tmp_path, me, 3)
            await mine[2].connect()

    sends = [_sender(d1 if i % 2 else d2, conv, f"me{i}", PER_SIDE) for i, conv in enumerate(convs)]
    sends += [_sender(o, o.direct_id(me), f"peer{i}", PER_SIDE) for i, o in enumerate(others)]
    await asyncio.wait_for(asyncio.gather(*sends, churn()), 60)
    d3 = mine[2]
    for c in (d1, d2, *others):
        await eventually(lambda c=c: _no_unsent(c), timeout=60, what="every send acknowledged")
    fresh = await client(stack, tmp_path, me, 4)
    await fresh.connect()
    try:
        for conv in convs:
            await eventually(_count(fresh, conv, 2 * PER_SIDE), timeout=60, what="the fresh device's sync")
            want = await store_view(fresh, conv)
            assert [r[0] for r in want] == list(range(1, 2 * PER_SIDE + 1)), want
            for c in (d1, d2, d3):
                await eventually(_count(c, conv, 2 * PER_SIDE), timeout=60, what=f"device {c.device_id}")
                assert await store_view(c, conv) == want, (c.device_id, c.stats)
                assert told_once(c, conv), c.device_id
            unread = {c.device_id: (await c.conversation(conv)).unread for c in (d1, d2, d3, fresh)}
            assert len(set(unread.values())) == 1, unread
        print({c.device_id: (c.stats.get("pushes_applied", 0), c.stats["pages"]) for c in (d1, d2, d3)})
    finally:
        await close_all(d1, d2, d3, fresh, *others)


async def _no_unsent(c) -> bool:
    return not await c.unsent()


def _count(c, conv: bytes, n: int):
    async def check() -> bool:
        return len(await c.store.run(c.store.messages, conv)) == n
    return check


async def test_a_burst_past_the_inline_queue_reaches_the_device_once_in_order(stack, tmp_path):
    a, b = users(2)
    sa, rb = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, b, 1)
    await sa.connect(), await rb.connect()
    conv = (await sa.open_direct(b)).conversation_id
    n = INLINE_QUEUE_MAX + 44
    try:
        for i in range(n):
            await sa.send_text(conv, f"burst {i}", wait=False)
        await eventually(_count(rb, conv, n), timeout=90, what="the burst at the recipient")
        assert [r[2] for r in await store_view(rb, conv)] == [f"burst {i}".encode() for i in range(n)]
        assert told_once(rb, conv) and len(rb.told.messages(conv)) == n
        shown = await rb.conversation(conv)
        assert (shown.unread, shown.unread_exact) == (200, False)  # the window's cap (design §6)
        print("burst:", rb.stats.get("pushes_applied", 0), "applied,", rb.stats["pages"], "pages")
    finally:
        await close_all(sa, rb)


async def test_a_recall_and_an_edit_right_after_an_inline_message_reach_the_device(stack, tmp_path):
    a, b = users(2)
    sa, rb = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, b, 1)
    await sa.connect(), await rb.connect()
    conv = (await sa.open_direct(b)).conversation_id
    try:
        first = await sa.send_text(conv, "to be recalled")
        second = await sa.send_text(conv, "to be edited")
        applied = rb.stats.get("pushes_applied", 0)
        await sa.recall(conv, first.message_id)
        await sa.edit(conv, second.message_id, "edited")
        await sa.send_text(conv, "after")

        async def settled() -> bool:
            rows = await rb.store.run(rb.store.messages, conv)
            return [(m.body, m.state) for m in rows] == [(b"", 1), (b"edited", 0), (b"after", 0)]
        await eventually(settled, timeout=30, what="the recall and the edit on the receiver")
        assert (await rb.conversation(conv)).unread == 2  # the recalled one no longer counts
        print("recall/edit:", applied, rb.stats.get("pushes_applied", 0), rb.stats["pages"])
    finally:
        await close_all(sa, rb)


async def test_replies_mentions_budget_bodies_and_reactions_right_after_reach_the_device_whole(stack, tmp_path):
    a, b = users(2)
    sa, rb = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, b, 1)
    await sa.connect(), await rb.connect()
    conv = (await sa.open_direct(b)).conversation_id
    try:
        first = await sa.send_text(conv, "first")
        await sa.send(conv, b"a reply", reply_to=first.message_id, mentions=[b])
        # bodies around INLINE_MAX_BYTES, cut at UTF-8 boundaries (3-byte characters)
        bodies = ["€" * (n // 3) + "x" * (n % 3) for n in (3950, 4000, 4060, 4095, 4096, 4097)]
        for text in bodies:
            await sa.send_text(conv, text)
        reacted = await sa.send_text(conv, "react to me")
        await sa.reactions.add(conv, reacted.message_id, "👍")
        await sa.send_text(conv, "last")
        await eventually(_count(rb, conv, 3 + len(bodies) + 1), timeout=30, what="everything at the receiver")
        rows = await rb.store.run(rb.store.messages, conv)
        assert [m.body for m in rows] == [b"first", b"a reply", *[t.encode() for t in bodies], b"react to me", b"last"]
        got = rows[1]
        assert got.reply is not None and bytes(got.reply.message_id) == first.message_id, got
        assert got.mentions == (b,), got
        await eventually(lambda: (rb.reactions.known(reacted.message_id) or _NONE).count("👍") == 1,
                         timeout=15, what="the reaction on the receiver")
        late = await client(stack, tmp_path, b, 2)  # a device that pulls it all: the summary rides the pull
        await late.connect()
        try:
            await eventually(_count(late, conv, len(rows)), timeout=30, what="the late device's sync")
            assert await store_view(late, conv) == await store_view(rb, conv)
            assert (late.reactions.known(reacted.message_id) or _NONE).count("👍") == 1
        finally:
            await late.close()
        print("whole:", rb.stats.get("pushes_applied", 0), "applied,", rb.stats["pages"], "pages")
    finally:
        await close_all(sa, rb)


class _NONE:
    @staticmethod
    def count(emoji: str) -> int:
        return 0


async def test_a_user_writing_to_itself_gets_each_message_once_on_both_devices(stack, tmp_path):
    (a,) = users(1)
    d1, d2 = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, a, 2)
    await d1.connect(), await d2.connect()
    conv = d1.direct_id(a)
    try:
        for i in range(10):
            await d1.runtime.send_message(conv, a, f"note {i}".encode())
        for d in (d1, d2):
            await eventually(_count(d, conv, 10), timeout=30, what=f"device {d.device_id}")
            assert [r[2] for r in await store_view(d, conv)] == [f"note {i}".encode() for i in range(10)]
            assert told_once(d, conv) and len(d.told.messages(conv)) == 10
        print("self:", [(d.stats.get("pushes_applied", 0), d.stats["pages"]) for d in (d1, d2)])
    finally:
        await close_all(d1, d2)


async def test_inline_pushes_arriving_during_slow_pulls_apply_nothing_twice(stack, tmp_path):
    a, b = users(2)
    sa = await client(stack, tmp_path, a, 1)
    await sa.connect()
    conv = (await sa.open_direct(b)).conversation_id
    bodies = [f"backlog {i}".encode() for i in range(50)]  # the connect-time sync's pull is in flight ...
    for body in bodies:
        await sa.send(conv, body)
    proxy = FaultProxy(stack.gateway_addr, delay_s=0.25, down_bps=64 * 1024)  # ... and every later one slow
    rb = await client(stack, tmp_path, b, 1, endpoint=await proxy.start())
    connecting = asyncio.get_running_loop().create_task(rb.connect())
    try:
        for i in range(160):  # small (inline) and large (referenced: position only, a pull) bodies mixed
            if i == 40:  # from here on the receiver is synced: inline pushes queue behind slow pulls
                await asyncio.wait_for(connecting, 60)
            bodies.append(f"live {i}".encode() if i % 5 else os.urandom(6000))
            await sa.send(conv, bodies[-1], wait=False)
            await asyncio.sleep(0.01 if i < 40 else 0.06)
        await eventually(_count(rb, conv, len(bodies)), timeout=90, what="everything at the slow receiver")
        assert [r[2] for r in await store_view(rb, conv)] == bodies
        assert told_once(rb, conv) and len(rb.told.messages(conv)) == len(bodies)
        print("slow:", rb.stats.get("pushes_applied", 0), "applied,", rb.stats["pages"], "pages")
    finally:
        await close_all(sa, rb)
        await proxy.stop()


async def test_more_inline_pushes_than_the_queue_holds_behind_a_held_flight_are_pulled(stack, tmp_path):
    a, b = users(2)
    sa, rb = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, b, 1)
    await sa.connect(), await rb.connect()
    conv = (await sa.open_direct(b)).conversation_id
    await sa.send_text(conv, "first")
    await eventually(_count(rb, conv, 1), what="the first message")
    core, stalled, release = rb.runtime.core, asyncio.Event(), asyncio.Event()
    apply = core.apply

    async def held_apply(fn, *args, **kw):  # the flight's next store change waits (a busy disk)
        if not stalled.is_set():
            stalled.set()
            await release.wait()
        return await apply(fn, *args, **kw)

    core.apply = held_apply
    n = INLINE_QUEUE_MAX + 44
    bodies = [b"first"] + [f"burst {i}".encode() for i in range(n)]
    pushes = rb.stats.get("pushes", 0)
    try:
        for body in bodies[1:]:
            await sa.send(conv, body, wait=False)
        # every push arrived while the flight is held: more than the queue holds wait
        await eventually(lambda: rb.stats.get("pushes", 0) - pushes >= n, timeout=60, what="the pushes arrived")
        assert stalled.is_set()
        release.set()
        await eventually(_count(rb, conv, len(bodies)), timeout=90, what="the burst behind the held flight")
        assert [r[2] for r in await store_view(rb, conv)] == bodies
        assert told_once(rb, conv) and len(rb.told.messages(conv)) == len(bodies)
        assert rb.stats.get("pushes_applied", 0) <= INLINE_QUEUE_MAX + 1, rb.stats  # the oldest were dropped
        print("held:", rb.stats.get("pushes_applied", 0), "applied,", rb.stats["pages"], "pages")
    finally:
        await close_all(sa, rb)
