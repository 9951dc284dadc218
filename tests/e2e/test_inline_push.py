"""Inline pushes on the real stack (docs/decisions/0156; issue 41): two online SDK
clients exchanging messages apply almost every one from its push (no pull), each
message told once and in order; a device that was offline pulls what it missed and
then applies pushes again. Fails without inline pushes: every delivery pulls."""

from __future__ import annotations

from qim.sdk import direct_conversation
from tests.sdk.realstack import eventually, runtime, shutdown, users

N = 40


def told_once_in_order(rt, conv: bytes, bodies: list[bytes]) -> bool:
    told = rt.told.messages(conv)
    return [m.body for m in told] == bodies and len({m.message_id for m in told}) == len(bodies)


async def test_online_clients_apply_pushes_without_pulls_each_message_once_in_order(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    pages = {rt: rt.stats["pages"] for rt in (ra, rb)}
    bodies = []
    for i in range(N):  # an exchange: each waits for the other's message before answering
        sender, receiver = (ra, rb) if i % 2 == 0 else (rb, ra)
        body = f"message {i}".encode()
        bodies.append(body)
        await sender.send_message(conv, b if sender is ra else a, body)
        await eventually(lambda r=receiver, n=i + 1: len(r.told.messages(conv)) == n, what=f"message {i} told")
    for rt in (ra, rb):
        await eventually(lambda rt=rt: len(rt.told.messages(conv)) == N, what="every message told")
        assert told_once_in_order(rt, conv, bodies)
        assert [m.body for m in await rt.store.run(rt.store.messages, conv)] == bodies
        # each device gets a push for every message (its own entry too): nearly all applied
        assert rt.stats.get("pushes_applied", 0) >= N - 2, rt.stats
        assert rt.stats["pages"] - pages[rt] <= 2, rt.stats  # pulls far below N
    await shutdown(ra, rb)


async def test_a_device_back_from_offline_pulls_the_gap_then_applies_pushes(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    bodies = [b"before"]
    await ra.send_message(conv, b, bodies[0])
    await eventually(lambda: len(rb.told.messages(conv)) == 1, what="the first message")
    await shutdown(rb)  # offline: its store's cursor stays at the first message
    for i in range(5):
        bodies.append(f"while offline {i}".encode())
        await ra.send_message(conv, b, bodies[-1])
    rb2 = runtime(stack, tmp_path, b)  # the same store: the cursor it committed
    await rb2.connect()
    await eventually(lambda: len(rb2.told.messages(conv)) == 5, what="the gap pulled")
    applied = rb2.stats.get("pushes_applied", 0)
    for i in range(5):
        bodies.append(f"after {i}".encode())
        await ra.send_message(conv, b, bodies[-1])
        await eventually(lambda n=5 + i + 1: len(rb2.told.messages(conv)) == n, what=f"after {i}")
    assert told_once_in_order(rb2, conv, bodies[1:])
    assert [m.body for m in await rb2.store.run(rb2.store.messages, conv)] == bodies
    assert rb2.stats.get("pushes_applied", 0) - applied >= 4, rb2.stats  # online again: from the pushes
    await shutdown(ra, rb2)
