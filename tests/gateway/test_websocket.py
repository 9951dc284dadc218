"""WebSocket on the gateway's client port (qim/services/gateway/ws.py, qim/net/websocket.py,
qim/net/ws_handshake.py; docs/protocol.md "WebSocket"), in process, no backends: one
address serves raw frames (ALPN qim/1) and WebSocket (ALPN http/1.1), one binary message
carries exactly one chunk, and each kind of bad input closes that connection with a
clear close code (or an HTTP refusal) while a bystander connection stays served. The
client is the `websockets` library's own (tests/gateway/wspeer.py)."""

from __future__ import annotations

import asyncio

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from qim.net.framed import open_framed
from qim.net.tls import client_port_context
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from tests.gateway import wspeer
from tests.gateway.wspeer import ORIGIN, auth_frame, frame, request, ws_client


@pytest.fixture
async def node(tmp_path):
    async with wspeer.gateway(tmp_path) as n:
        yield n


@pytest.fixture
async def bystander(node):
    """An authenticated WebSocket connection that must stay served whatever the others do."""
    ws = await ws_client(node, origin=ORIGIN)
    op, _, _ = await request(ws, Opcode.AUTH, 1, connection_pb2.Auth(token=wspeer.standin.token(70)).SerializeToString())
    assert op == Opcode.AUTH_OK
    yield ws
    op, _, _ = await request(ws, Opcode.PING, 99)
    assert op == Opcode.PONG, "the bystander was touched"
    await ws.close()


async def closed_with(ws) -> tuple[int, str]:
    """Read until the gateway closes; its close code and reason."""
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    assert ws.close_code is not None, "closed without a close frame"
    return ws.close_code, ws.close_reason or ""


async def test_one_address_serves_raw_frames_and_websocket(node):
    host, port = node.addr.rsplit(":", 1)
    raw = await open_framed(host, int(port), tls=client_port_context(node.ca_file), server_hostname=host)
    raw.send(Opcode.AUTH, 1, connection_pb2.Auth(token=wspeer.standin.token(71)).SerializeToString())
    assert (await asyncio.wait_for(raw.read_frame(), 10))[0] == Opcode.AUTH_OK
    raw.abort()
    for secure in (True, False):  # wss:// on the client port, ws:// on the development listener
        ws = await ws_client(node, origin=ORIGIN, secure=secure)
        op, rid, body = await request(ws, Opcode.AUTH, 5, connection_pb2.Auth(
            token=wspeer.standin.token(72, 1 + secure)).SerializeToString())
        assert (op, rid) == (Opcode.AUTH_OK, 5)
        assert connection_pb2.AuthOk.FromString(body).user_id == 72
        op, rid, _ = await request(ws, Opcode.PING, 6)
        assert (op, rid) == (Opcode.PONG, 6)
        await ws.close()
        assert ws.close_code == 1000


async def test_a_frame_in_several_chunks_is_one_message_per_chunk(node, bystander):
    ws = await ws_client(node)
    await ws.send(auth_frame(73))
    big = b"p" * 150_000  # three chunks with MORE, reassembled by (opcode, request_id)
    op, rid, _ = await request(ws, Opcode.PING, 7, big)
    assert (op, rid) == (Opcode.PONG, 7)
    await ws.close()


@pytest.mark.parametrize("what, send, code, reason", [
    ("split", lambda c: [c[:20], c[20:]], 1002, "split across messages"),
    ("header cut", lambda c: [c[:11]], 1002, "split across messages"),
    ("two frames", lambda c: [c + c], 1002, "more than one frame"),
    ("bad magic", lambda c: [b"\x00" + c[1:]], 1002, "BadMagic"),
    ("bad crc", lambda c: [c[:19] + bytes([c[19] ^ 1]) + c[20:]], 1002, "BadCrc"),
], ids=lambda v: v if isinstance(v, str) else "")
async def test_a_message_that_is_not_exactly_one_frame_closes_that_connection(node, bystander, what, send, code,
                                                                             reason):
    ws = await ws_client(node)
    for message in send(frame(Opcode.PING, 3, b"x" * 40)[0]):
        await ws.send(message)
    got_code, got_reason = await closed_with(ws)
    assert got_code == code and reason in got_reason, (got_code, got_reason)


async def test_a_text_message_closes_with_1003(node, bystander):
    ws = await ws_client(node)
    await ws.send("hello")  # a str: a text message
    code, reason = await closed_with(ws)
    assert code == 1003 and "binary" in reason


async def test_a_message_over_one_chunk_closes_with_1009(node, bystander):
    ws = await ws_client(node)
    await ws.send(auth_frame(74))
    op, _, _ = await request(ws, Opcode.PING, 2)
    await ws.send(frame(Opcode.PING, 3, b"y" * 64 * 1024)[0] + b"z")  # 20 + 64 KiB + 1
    code, _ = await closed_with(ws)
    assert op == Opcode.PONG and code == 1009


async def test_no_auth_in_time_closes_with_1008(tmp_path):
    async with wspeer.gateway(tmp_path, auth_timeout_s=0.5) as n:
        ws = await ws_client(n)
        code, reason = await closed_with(ws)
        assert code == 1008 and "AUTH" in reason


async def test_the_upgrade_checks_origin_and_path(node, bystander):
    for origin in (ORIGIN, "http://localhost:5173", None):  # listed, a port pattern, not a browser
        ws = await ws_client(node, origin=origin)
        await ws.close()
    for origin, path, status in (("https://evil.example.com", "/qim/ws", 403), ("http://localhost.evil.com:5173", "/qim/ws", 403),
                                 (ORIGIN, "/other", 404)):
        with pytest.raises(InvalidStatus) as refused:
            await ws_client(node, origin=origin, path=path)
        assert refused.value.response.status_code == status
    refusals = {r: node.metrics_base.value("qim_gateway_ws_refused_total", {"reason": r}) for r in ("origin", "path")}
    assert refusals == {"origin": 2, "path": 1}


async def test_plain_http_on_the_websocket_path_is_refused_with_400(node, bystander):
    host, port = node.ws_addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /qim/ws HTTP/1.1\r\nHost: x\r\n\r\n")  # no Upgrade
    status = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status.startswith(b"HTTP/1.1 426") or status.startswith(b"HTTP/1.1 400"), status
