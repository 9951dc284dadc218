"""Backlog and wake-up logic of a mailbox push link (fault 13;
docs/decisions/0012-push-link-repair.md). Pure logic: the RPC client is a stand-in that
records what would go on the wire.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox import pushlink
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.pushlink import PushLink
from qim.services.mailbox.targets import PUSH_USERS_PER_FRAME, push_bodies
from tests.net.test_oneway import until


class FakeClient:
    def __init__(self) -> None:
        self.connected = False
        self.queued_bytes = 0
        self.sent: list[bytes] = []
        self.refuse = False
        self.lost = asyncio.Event()

    async def close(self) -> None:
        self.connected = False

    def send_oneway(self, opcode: int, body: bytes) -> None:
        assert opcode == Opcode.PUSH_BATCH and self.connected
        self.sent.append(body)

    async def connect(self) -> None:
        from qim.errors import ErrorCode, RequestError

        if self.refuse:
            raise RequestError(ErrorCode.UNAVAILABLE, "refused")
        self.connected = True
        self.lost.clear()

    async def wait_lost(self, timeout: Optional[float]) -> None:
        try:
            await asyncio.wait_for(self.lost.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def drop(self) -> None:
        self.connected = False
        self.lost.set()


def decoded(bodies: list[bytes]) -> list[internal_pb2.PushBatch]:
    return [internal_pb2.PushBatch.FromString(b) for b in bodies]


METRICS = MailboxMetrics()  # every link of this module counts here


def dropped(reason: str) -> float:
    return METRICS.value("qim_mailbox_push_dropped_total", {"reason": reason})


def link(**kw) -> tuple[PushLink, FakeClient]:
    client = FakeClient()
    return PushLink("127.0.0.1:1", "mailbox@a", lambda: [2, 6], bytes(16), client=client, metrics=METRICS, **kw), client


def body(user: int) -> bytes:
    return internal_pb2.PushBatch(tenant_id=bytes(16), targets=[internal_pb2.PushBatch.Target(user_id=user)]
                                  ).SerializeToString()


def test_a_new_process_greets_with_wake_all_then_sends_its_backlog_in_order():
    pl, client = link()
    pl.push(body(1))
    pl.push(body(2))  # link not up yet: kept
    assert client.sent == [] and pl.backlog_bytes == len(body(1)) + len(body(2))
    client.connected = True
    assert pl.on_connected() == 2
    hello, *rest = decoded(client.sent)
    assert (hello.hello, hello.node_id, list(hello.shards), hello.wake_all) == (True, "mailbox@a", [2, 6], True)
    assert [b.targets[0].user_id for b in rest] == [1, 2] and pl.backlog_bytes == 0
    pl.push(body(3))  # live link: straight out, behind the backlog
    assert decoded(client.sent)[-1].targets[0].user_id == 3


def test_a_reconnect_without_drops_does_not_ask_for_a_wake_up():
    pl, client = link()
    client.connected = True
    pl.on_connected()
    client.drop()
    pl.push(body(7))  # the gateway restarts: kept for the new link
    client.sent.clear()
    client.connected = True
    pl.on_connected()
    hello, flushed = decoded(client.sent)
    assert hello.hello and not hello.wake_all and flushed.targets[0].user_id == 7


def test_a_full_backlog_drops_with_a_counter_and_the_next_hello_wakes_the_devices():
    pl, client = link(backlog_bytes=3 * len(body(1)))
    client.connected = True
    pl.on_connected()
    client.drop()
    before = dropped("backlog_full")
    for user in range(1, 6):
        pl.push(body(user))
    assert dropped("backlog_full") - before == 2
    client.sent.clear()
    client.connected = True
    pl.on_connected()
    hello, *rest = decoded(client.sent)
    assert hello.hello and hello.wake_all  # the two dropped pushes are repaired by a wake-up
    assert [b.targets[0].user_id for b in rest] == [1, 2, 3]


def test_a_gateway_that_does_not_read_loses_pushes_and_gets_a_wake_request_once_drained():
    pl, client = link(queue_limit=1000)
    client.connected = True
    pl.on_connected()
    client.sent.clear()
    client.queued_bytes = 5000
    before = dropped("gateway_slow")
    pl.push(body(1))
    pl.maybe_wake()  # still full: nothing yet
    assert client.sent == [] and dropped("gateway_slow") - before == 1
    client.queued_bytes = 400
    pl.maybe_wake()
    (wake,) = decoded(client.sent)
    assert wake.wake_all and not wake.hello and (wake.node_id, list(wake.shards)) == ("mailbox@a", [2, 6])
    pl.maybe_wake()
    assert len(client.sent) == 1  # one request per episode


async def test_a_running_link_sends_the_wake_request_once_the_gateway_drained():
    """run() sleeps while nothing is pending (no poll), and a drop makes it poll until the
    gateway has read enough: the wake request leaves without another push."""
    pl, client = link(queue_limit=1000)
    task = asyncio.get_running_loop().create_task(pl.run())
    try:
        await until(lambda: pl.live and len(client.sent) == 1)  # the hello
        assert not pl.polling()
        client.queued_bytes = 5000
        pl.push(body(1))  # dropped: the gateway is slow
        assert pl.polling()
        await asyncio.sleep(0.3)
        assert len(client.sent) == 1  # still full: no wake request yet
        client.queued_bytes = 0
        await until(lambda: len(client.sent) == 2, 2.0)
        (wake,) = decoded(client.sent[1:])
        assert wake.wake_all and not wake.hello and not pl.polling()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_run_reconnects_within_the_backoff_cap_and_flushes(monkeypatch):
    monkeypatch.setattr(pushlink, "RECONNECT_MIN_S", 0.01)
    pl, client = link()
    client.refuse = True
    task = asyncio.get_running_loop().create_task(pl.run())
    await asyncio.sleep(0.1)
    pl.push(body(9))
    assert client.sent == []
    client.refuse = False
    for _ in range(100):
        if len(client.sent) == 2:
            break
        await asyncio.sleep(0.01)
    assert [b.hello for b in decoded(client.sent)] == [True, False] and pl.linked
    client.drop()  # lost: the loop notices at once and links again
    for _ in range(100):
        if len(client.sent) == 3:
            break
        await asyncio.sleep(0.01)
    assert decoded(client.sent)[-1].hello
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_push_bodies_are_positions_split_a_large_audience_far_below_the_frame_limit():
    users = [(1 << 62) + u for u in range(1, 20_001)]  # a designed-for 100k group's shard share, large ids
    bodies = push_bodies(0, (1 << 48) | 7, b"m" * 16, users)
    assert len(bodies) == 2 and max(len(b) for b in bodies) <= PUSH_USERS_PER_FRAME * 10 + 64
    positions = [p for b in decoded(bodies) for p in b.positions]
    assert {(p.mailbox_seq, p.message_id) for p in positions} == {((1 << 48) | 7, b"m" * 16)}
    assert [u for p in positions for u in p.user_ids] == users
    assert all(not b.targets for b in decoded(bodies))  # no entries, no bodies (docs/decisions/0033)



def test_shards_taken_over_are_woken_by_name_without_waking_the_others():
    pl, client = link()
    client.connected = True
    pl.on_connected()
    client.sent.clear()
    pl.wake([9])  # a shard this node just took over: its previous owner's pushes may be lost
    (wake,) = decoded(client.sent)
    assert (wake.wake_all, wake.hello, wake.node_id, list(wake.shards)) == (True, False, "mailbox@a", [9])
    pl.maybe_wake()
    assert len(client.sent) == 1
    client.drop()
    pl.wake([11])  # asked while the link is down: the next hello carries it with the served shards
    client.sent.clear()
    client.connected = True
    pl.on_connected()
    (hello,) = decoded(client.sent)
    assert hello.hello and hello.wake_all and list(hello.shards) == [2, 6, 11]
