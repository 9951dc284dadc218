"""A slow connection gets back-pressure and bounded buffering, never a stalled heartbeat
(docs/design.md §4 "PONG and ACK frames pass between the chunks of a
large frame and the heartbeat never stalls").

Each client reaches the gateway through tests/net/throttle.py, a proxy that delivers
the gateway's bytes at a fixed rate with a small link buffer.

Observed before the fix: the gateway handed a whole page (up to 1 MiB) to the socket at
once, so a PONG queued after it waited behind every byte of the page: at 100 KiB/s the
PING of a device receiving a 900 KiB page was answered after 7.0 s (the SDK's probe
deadline is 4 s), at 30 KiB/s PINGs waited up to 8.3 s, and four devices pipelining
pulls grew the gateway's RSS by 103 MiB (every reply was queued at once).
"""

from __future__ import annotations

import asyncio
import os
import random
from types import SimpleNamespace

from qim._core import ids
from qim.proto.v1 import mailbox_pb2, message_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.net.throttle import ThrottleProxy

KIB = 1024
MIB = 1024 * KIB
PROBE_DEADLINE_S = 4.0  # the SDK's liveness probe: PING, PONG within 4 s


def users(n: int) -> list[int]:
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


async def slow_login(stack, proxy_addr: str, user: int) -> RawClient:
    return await RawClient.login(SimpleNamespace(gateway_addr=proxy_addr, token_key=stack.token_key,
                                                 ca_file=stack.ca_file), user,
                                 device=random.getrandbits(31) + 1)


async def send_many(stack, sender: int, peer: int, bodies: list[bytes]) -> None:
    """Pipelined sends on one connection; every one must be acknowledged."""
    a = await RawClient.login(stack, sender)
    for i in range(0, len(bodies), 32):
        for j, body in enumerate(bodies[i:i + 32]):
            a.stream.send(Opcode.SEND_MESSAGE, 10_000 + i + j, message_pb2.SendMessage(
                client_message_id=os.urandom(16), conversation_id=ids.conversation_id_direct(0, sender, peer),
                recipient_user_id=peer, message_type=1, body=body).SerializeToString())
        acked = 0
        while acked < len(bodies[i:i + 32]):
            op, rid, _ = await asyncio.wait_for(a.stream.read_frame(), 30)
            if rid:  # rid 0: pushes of the sender's own entries
                assert op == Opcode.SEND_ACK, op
                acked += 1
    await a.close()


async def materialized(stack, user: int, count: int, timeout: float = 30.0) -> None:
    """Wait until `count` entries are in the user's mailbox (checked over a fast link)."""
    probe = await RawClient.login(stack, user, device=1)
    assert len(await wait_for_entries(probe, count, timeout=timeout)) == count
    await probe.close()


async def read_until(client: RawClient, want_rid: int, timeout: float) -> list[tuple[int, int, bytes, float]]:
    """Frames (opcode, rid, body, arrival time) up to and including request `want_rid`'s reply."""
    loop = asyncio.get_running_loop()
    got = []
    while True:
        op, rid, body = await asyncio.wait_for(client.stream.read_frame(), timeout)
        got.append((op, rid, body, loop.time()))
        if rid == want_rid:
            return got


async def test_ping_is_answered_while_a_900kib_page_arrives_at_100kib_s(stack):
    a, b = users(2)
    bodies = [os.urandom(900 * KIB) for _ in range(2)]
    await send_many(stack, a, b, bodies)
    await materialized(stack, b, 2)
    proxy = ThrottleProxy(stack.gateway_addr, rate=100 * KIB)
    slow = await slow_login(stack, await proxy.start(), b)
    loop = asyncio.get_running_loop()
    started = loop.time()
    slow.stream.send(Opcode.PULL_MAILBOX, 10, mailbox_pb2.PullMailbox(cursor=0).SerializeToString())
    while proxy.received[0] < 200 * KIB:  # the page is arriving
        await asyncio.sleep(0.05)
    ping_at = loop.time()
    slow.stream.send(Opcode.PING, 11, b"")
    frames = await read_until(slow, 11, 30)
    pong_after = frames[-1][3] - ping_at
    print(f"PONG after {pong_after:.2f}s with the page arriving")
    assert frames[-1][0] == Opcode.PONG
    assert pong_after < PROBE_DEADLINE_S, f"PONG took {pong_after:.1f}s behind the page"
    rest = await read_until(slow, 10, 30)
    op, _, body, done_at = rest[-1]
    assert op == Opcode.MAILBOX_BATCH
    page = mailbox_pb2.MailboxBatch.FromString(body)
    assert [e.body for e in page.entries] == bodies[:1]  # one 900 KiB entry per 512 KiB page
    assert done_at - started > 6.0  # the page really crossed the 100 KiB/s link after the PONG
    await slow.close()
    await proxy.close()


async def test_a_slow_device_catches_up_by_pulling_at_its_own_pace(stack):
    """300 messages of 1 KiB for a device on a 30 KiB/s link: every PING it sends while
    the pages arrive is answered within the probe deadline, and it reaches the end."""
    a, b = users(2)
    bodies = [os.urandom(KIB) for _ in range(300)]
    await send_many(stack, a, b, bodies)
    await materialized(stack, b, 300)
    proxy = ThrottleProxy(stack.gateway_addr, rate=30 * KIB, link_buffer=32 * KIB)
    slow = await slow_login(stack, await proxy.start(), b)
    loop = asyncio.get_running_loop()
    cursor, got, rid, pong_waits = 0, [], 100, []
    pending_ping: dict[int, float] = {}
    while True:
        rid += 1
        pull_rid = rid
        slow.stream.send(Opcode.PULL_MAILBOX, pull_rid, mailbox_pb2.PullMailbox(cursor=cursor).SerializeToString())
        next_ping = loop.time() + 1.0
        while True:
            try:
                op, frid, body = await asyncio.wait_for(slow.stream.read_frame(), max(0.01, next_ping - loop.time()))
            except asyncio.TimeoutError:
                rid += 1
                pending_ping[rid] = loop.time()
                slow.stream.send(Opcode.PING, rid, b"")
                next_ping = loop.time() + 1.0
                continue
            if op == Opcode.PONG:
                pong_waits.append(loop.time() - pending_ping.pop(frid))
            elif frid == pull_rid:
                assert op == Opcode.MAILBOX_BATCH, op
                break
        batch = mailbox_pb2.MailboxBatch.FromString(body)
        got += [e.body for e in batch.entries]
        cursor = batch.next_cursor
        if not batch.has_more:
            break
    print(f"PONG waits: max {max(pong_waits):.2f}s over {len(pong_waits)} probes")
    assert sorted(got) == sorted(bodies)  # every one exactly once (pipelined sends commit in any order)
    assert pong_waits and max(pong_waits) < PROBE_DEADLINE_S, pong_waits
    await slow.close()
    await proxy.close()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_gateway_memory_stays_bounded_while_slow_readers_pipeline_large_pulls(fresh_stack):
    """4 devices at 100 KiB/s each pipeline 32 pulls whose pages are 900 KiB: the
    gateway takes their requests only as its bounded per-connection queue drains, so its
    RSS grows by a few MiB per connection, not by 32 pages each (~115 MiB in all)."""
    st = fresh_stack
    a = users(1)[0]
    readers = users(4)
    for r in readers:
        await send_many(st, a, r, [os.urandom(900 * KIB)])
    for r in readers:
        await materialized(st, r, 1)
    pid = st.pids["gateway"]
    await asyncio.sleep(0.5)
    base = rss_bytes(pid)
    proxy = ThrottleProxy(st.gateway_addr, rate=100 * KIB)
    addr = await proxy.start()
    clients = [await slow_login(st, addr, r) for r in readers]
    req = mailbox_pb2.PullMailbox(cursor=0).SerializeToString()
    for c in clients:
        for i in range(32):
            c.stream.send(Opcode.PULL_MAILBOX, 1000 + i, req)
    peak = base
    for _ in range(60):  # 6 s: the mailbox answers within this; the links drain ~600 KiB each
        await asyncio.sleep(0.1)
        peak = max(peak, rss_bytes(pid))
    growth = peak - base
    print(f"gateway RSS {base / MIB:.0f} MiB -> peak {peak / MIB:.0f} MiB")
    for c in clients:
        await c.close()
    await proxy.close()
    assert growth < 4 * 8 * MIB, f"gateway RSS grew by {growth / MIB:.0f} MiB for 4 slow readers"
