"""OneWayLink (qim/net/oneway.py): bounded backlog while down, drops past it or past the
peer's queue limit (each reported once with its reason), greeting then backlog in order
on every reconnect, the idle hook on a live link, and a real reconnect over loopback."""

from __future__ import annotations

import asyncio
from typing import Optional

from qim.errors import ErrorCode, RequestError
from qim.net.framed import FramedStream, StreamClosed
from qim.net.oneway import DROP_BACKLOG_FULL, DROP_PEER_SLOW, DROPPED, IDLE_RECHECK_S, KEPT, SENT, OneWayLink

OP = 0x7F07


class FakeClient:
    def __init__(self) -> None:
        self.connected = False
        self.queued_bytes = 0
        self.sent: list[bytes] = []
        self.refuse = False
        self.lost = asyncio.Event()

    def send_oneway(self, opcode: int, body: bytes) -> None:
        if not self.connected:
            raise StreamClosed("not connected")
        assert opcode == OP
        self.sent.append(body)

    async def connect(self) -> None:
        if self.refuse:
            raise RequestError(ErrorCode.UNAVAILABLE, "refused")
        self.connected = True
        self.lost.clear()

    async def wait_lost(self, timeout: Optional[float]) -> None:
        try:
            await asyncio.wait_for(self.lost.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def close(self) -> None:
        self.connected = False

    def drop(self) -> None:
        self.connected = False
        self.lost.set()


class Greeting(OneWayLink):
    def __init__(self, client: FakeClient, **kw) -> None:
        self.greetings = 0
        self.idles = 0
        self.pending = True  # polling(): idle() has work
        super().__init__("127.0.0.1:1", OP, client=client, **kw)

    def greeting(self) -> bytes:
        self.greetings += 1
        return b"hello%d" % self.greetings

    def idle(self) -> None:
        self.idles += 1

    def polling(self) -> bool:
        return self.pending


def test_a_down_link_keeps_frames_up_to_the_backlog_then_drops_each_once():
    drops: list[str] = []
    client = FakeClient()
    link = OneWayLink("127.0.0.1:1", OP, queue_limit=100, backlog_bytes=10, on_drop=drops.append, client=client)
    assert [link.send(b"abcd"), link.send(b"efgh"), link.send(b"ijk")] == [KEPT, KEPT, DROPPED]
    assert link.backlog_bytes == 8 and drops == [DROP_BACKLOG_FULL]
    client.connected = True
    assert link.on_connected() == 2 and client.sent == [b"abcd", b"efgh"] and link.backlog_bytes == 0
    assert link.live and link.send(b"next") == SENT and client.sent[-1] == b"next"


def test_without_a_backlog_a_down_link_drops_at_once():
    drops: list[str] = []
    link = OneWayLink("127.0.0.1:1", OP, queue_limit=100, on_drop=drops.append, client=FakeClient())
    assert link.send(b"x") == DROPPED and drops == [DROP_BACKLOG_FULL]


def test_a_peer_that_does_not_read_loses_frames_and_the_link_stays_up():
    drops: list[str] = []
    client = FakeClient()
    link = OneWayLink("127.0.0.1:1", OP, queue_limit=100, backlog_bytes=1000, on_drop=drops.append, client=client)
    client.connected = True
    link.on_connected()
    client.queued_bytes = 101
    assert link.send(b"x") == DROPPED and drops == [DROP_PEER_SLOW] and link.live
    client.queued_bytes = 100
    assert link.send(b"y") == SENT


def test_a_connection_lost_unnoticed_keeps_the_frame_for_the_reconnect():
    client = FakeClient()
    link = OneWayLink("127.0.0.1:1", OP, queue_limit=100, backlog_bytes=100, client=client)
    client.connected = True
    link.on_connected()
    client.connected = False  # the reader task has not run yet
    assert link.send(b"late") == KEPT and not link.live
    client.connected = True
    assert link.on_connected() == 1 and client.sent == [b"late"]


async def test_run_greets_then_flushes_on_every_reconnect_and_calls_idle_while_live():
    client = FakeClient()
    client.refuse = True
    link = Greeting(client, queue_limit=100, backlog_bytes=100, reconnect_min_s=0.01, reconnect_max_s=0.02,
                    poll_s=0.01)
    task = asyncio.get_running_loop().create_task(link.run())
    await asyncio.sleep(0.05)
    assert link.send(b"kept") == KEPT and client.sent == []
    client.refuse = False
    await until(lambda: client.sent == [b"hello1", b"kept"])
    await until(lambda: link.idles >= 2)
    client.drop()
    assert link.send(b"between") == KEPT
    await until(lambda: client.sent[2:] == [b"hello2", b"between"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await link.close()
    assert not link.live


async def test_a_live_link_with_nothing_pending_sleeps_until_poked_or_lost():
    """No wake-up every poll_s on an idle link: idle() runs once per poke, and polling
    starts again when a poke leaves work pending; a loss still reconnects at once."""
    client = FakeClient()
    link = Greeting(client, queue_limit=100, backlog_bytes=100, reconnect_min_s=0.01, poll_s=0.01)
    link.pending = False
    task = asyncio.get_running_loop().create_task(link.run())
    try:
        await until(lambda: link.live and link.idles == 1)
        await asyncio.sleep(0.2)  # twenty poll periods
        assert link.idles == 1
        link.poke()
        await until(lambda: link.idles == 2)
        await asyncio.sleep(0.1)
        assert link.idles == 2
        link.pending = True
        link.poke()
        await until(lambda: link.idles >= 6)  # polling again
        link.pending = False
        client.drop()
        await until(lambda: client.sent[-1:] == [b"hello2"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_idle_link_whose_connection_closed_without_a_loss_reconnects():
    """A connection marked closed while its reader still waits (no loss reported: a TLS
    shutdown waiting for the peer) must not leave an idle link asleep for ever: the wait
    is bounded by IDLE_RECHECK_S and `connected` is checked again."""
    client = FakeClient()
    link = Greeting(client, queue_limit=100, backlog_bytes=100, reconnect_min_s=0.01, poll_s=0.01)
    link.pending = False
    task = asyncio.get_running_loop().create_task(link.run())
    try:
        await until(lambda: link.live and client.sent == [b"hello1"])
        client.connected = False  # closed, but `lost` never set
        await until(lambda: client.sent[-1:] == [b"hello2"], timeout=IDLE_RECHECK_S * 3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_real_peer_restart_is_bridged_by_the_backlog():
    received: list[bytes] = []

    async def on_conn(reader, writer):
        stream = FramedStream(reader, writer)
        while (item := await stream.read_frame()) is not None:
            received.append(item[2])

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    link = OneWayLink(f"127.0.0.1:{port}", OP, queue_limit=1 << 20, backlog_bytes=1 << 20, reconnect_min_s=0.01,
                      reconnect_max_s=0.05)
    task = asyncio.get_running_loop().create_task(link.run())
    await until(lambda: link.live)
    assert link.send(b"one") == SENT
    await until(lambda: received == [b"one"])
    server.close()
    await server.wait_closed()
    link._client._stream.abort()  # the peer is gone (a restart): the link notices and retries
    await until(lambda: not link.live)
    assert link.send(b"two") == KEPT
    server = await asyncio.start_server(on_conn, "127.0.0.1", port)
    await until(lambda: received == [b"one", b"two"], timeout=5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await link.close()
    server.close()


async def until(cond, timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)
