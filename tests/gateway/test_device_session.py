"""The device session apart from its connection (qim/services/gateway/device_session.py,
conn.py; docs/decisions/0116 §3): a TCP connection ends its session (behaviour
unchanged: unregistered when it closes); a connection that detaches leaves its session
registered, a later connection attached to it carries its pushes without a new AUTH,
and a session left detached is reaped by the keepalive sweep, which ends it, or ends
at once when its token is revoked.

Real ClientConnections over loopback sockets on the stand-in gateway
(tests/gateway/standin.py), no engines: the seam is the gateway's own.
"""

from __future__ import annotations

import asyncio
import time

from qim.net.framed import FramedStream, open_framed
from qim.proto.v1 import connection_pb2, internal_pb2, mailbox_pb2
from qim.protocol import Opcode
from qim.services.gateway.conn import ClientConnection
from qim.services.gateway.device_session import DeviceSession
from qim.services.gateway.keepalive import Keepalive
from tests.gateway.standin import StandinGateway, gateway, token

USER = 77


async def until(check, what: str, timeout: float = 20.0) -> None:
    """Poll `check()` until true (generous: the machine is shared)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.02)


class Port:
    """A loopback listener whose accepted connections attach to `session` (a new one when
    None), ending it or detaching from it on close (`ends_session`)."""

    def __init__(self, gw: StandinGateway, session: DeviceSession | None, ends_session: bool) -> None:
        self.gw, self.session, self.ends_session = gw, session, ends_session
        self.conns: list[ClientConnection] = []
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> tuple[str, int]:
        async def on_client(reader, writer):
            conn = ClientConnection(FramedStream(reader, writer), self.gw, self.session, self.ends_session)
            self.conns.append(conn)
            await conn.run()

        self.server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        return "127.0.0.1", self.server.sockets[0].getsockname()[1]


def push(gw: StandinGateway, seq: int) -> None:
    gw.online.deliver(internal_pb2.PushBatch(tenant_id=bytes(16), positions=[
        internal_pb2.PushBatch.Position(mailbox_seq=seq, user_ids=[USER])]))


async def next_push(device) -> int:
    while True:
        op, _, body = await asyncio.wait_for(device.read_frame(), 20)
        if op == Opcode.PUSH_EVENTS:
            return mailbox_pb2.PushEvents.FromString(body).mailbox_seq


async def login(addr: tuple[str, int]):
    device = await open_framed(*addr)
    device.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(USER)).SerializeToString())
    op, rid, _ = await asyncio.wait_for(device.read_frame(), 20)
    assert (op, rid) == (Opcode.AUTH_OK, 1)
    return device


async def test_a_tcp_connection_ends_its_session_when_it_closes():
    gw = gateway()
    port = Port(gw, None, ends_session=True)
    device = await login(await port.start())
    session = port.conns[0].session
    assert gw.online.connections(0, USER) == [session]
    device.abort()
    await until(lambda: session.ended, "the session ended with its connection")
    assert gw.online.connections(0, USER) == []
    port.server.close()


async def test_a_detached_session_stays_registered_and_a_new_connection_carries_its_pushes():
    gw = gateway()
    first = Port(gw, None, ends_session=False)
    device = await login(await first.start())
    session = first.conns[0].session
    push(gw, 1)
    assert await next_push(device) == 1

    device.abort()
    await until(lambda: session.link is None, "the connection detached")
    assert not session.ended and gw.online.connections(0, USER) == [session]
    push(gw, 2)  # nobody carries it: dropped (counted), the device pulls on its next connection
    assert gw.metrics.value("qim_gateway_push_dropped_total") == 1

    second = Port(gw, session, ends_session=True)
    again = await open_framed(*await second.start())  # no AUTH: the session is authenticated
    again.send(Opcode.PING, 5, b"")
    op, rid, _ = await asyncio.wait_for(again.read_frame(), 20)
    assert (op, rid) == (Opcode.PONG, 5)
    assert session.link is second.conns[0]
    push(gw, 3)
    assert await next_push(again) == 3

    again.abort()  # this transport ends the session
    await until(lambda: session.ended, "the session ended with its last connection")
    assert gw.online.connections(0, USER) == []
    first.server.close()
    second.server.close()


async def test_a_session_left_detached_is_reaped_by_the_keepalive_sweep():
    gw = gateway()
    port = Port(gw, None, ends_session=False)
    device = await login(await port.start())
    session = port.conns[0].session
    device.abort()
    await until(lambda: session.link is None, "the connection detached")
    sweep = Keepalive(gw.online, heartbeat_s=gw.config.heartbeat_s)
    assert sweep.sweep(time.monotonic()) == 0  # just detached: not silent yet
    assert sweep.sweep(time.monotonic() + sweep.deadline_s + 1) == 1
    assert session.ended and gw.online.connections(0, USER) == []
    assert gw.metrics.value("qim_gateway_silent_closed_total", {"reason": "silent"}) == 1
    port.server.close()


async def test_a_detached_session_whose_token_is_revoked_ends_at_once():
    gw = gateway()
    port = Port(gw, None, ends_session=False)
    device = await login(await port.start())
    session = port.conns[0].session
    device.abort()
    await until(lambda: session.link is None, "the connection detached")
    session.revoked()  # what Revocations.apply calls (revocation.py)
    assert session.ended and gw.online.connections(0, USER) == []
    port.server.close()
