"""AUTH at a gateway connection (qim/services/gateway/{auth,conn,online}.py):
every refused token gets ERROR(UNAUTHENTICATED) with the request's id and then the
connection is CLOSED (docs/protocol.md "AUTH ... then close"), counted by reason; a
token's expiry ends its session with KICKED{TOKEN_EXPIRED}; the per-user connection cap.

A real ClientConnection over loopback sockets (tests/gateway/standin.py), no engines.
"""

from __future__ import annotations

import asyncio
import time

import jwt

from qim.consts import CONNECTION_CAP_RETRY_AFTER_MS
from qim.errors import ErrorCode
from qim.net.framed import open_framed, parse_addr
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import Opcode
from qim.wire.tokens import SigningKey
from tests.gateway.standin import KEY, gateway, serve, token


async def auth(addr: str, tok: str):
    """(reply opcode, body, closed afterwards?) of one AUTH."""
    stream = await open_framed(*parse_addr(addr))
    stream.send(Opcode.AUTH, 7, connection_pb2.Auth(token=tok).SerializeToString())
    op, rid, body = await asyncio.wait_for(stream.read_frame(), 5)
    assert rid == 7
    try:
        closed = await asyncio.wait_for(stream.read_frame(), 2) is None
    except asyncio.TimeoutError:
        closed = False
    except ConnectionError:
        closed = True
    stream.abort()
    return op, body, closed


def refused_count(gw, reason: str) -> float:
    return gw.metrics.value("qim_gateway_auth_refused_total", {"reason": reason})


async def test_each_refused_token_is_unauthenticated_then_closed_and_counted():
    gw = gateway()
    server, addr = await serve(gw)
    now = int(time.time())
    stranger = SigningKey.generate()
    claims = jwt.decode(token(5), options={"verify_signature": False})
    cases = {
        "expired": token(5, now=now - 4000),
        "not_yet_valid": token(5, now=now, not_before=now + 600),
        "unknown_kid": token(5, key=stranger),
        "signature": jwt.encode(claims, stranger.private, algorithm="EdDSA", headers={"kid": KEY.kid}),
        "audience": token(5, audience="other"),
        "algorithm": jwt.encode(claims, None, algorithm="none", headers={"kid": KEY.kid}),
        "tenant": token(5, tenant=9),
        "malformed": "dev1.00000000000000000000000000000000.5.1.abcd",  # the old HMAC form
    }
    try:
        for reason, tok in cases.items():
            op, body, closed = await auth(addr, tok)
            err = common_pb2.Error.FromString(body)
            assert (op, ErrorCode(err.code), err.request_opcode) == (Opcode.ERROR, ErrorCode.UNAUTHENTICATED,
                                                                    Opcode.AUTH), reason
            assert closed, f"{reason}: the connection stayed open after a refused AUTH"
            assert refused_count(gw, reason) == 1, reason
        op, _, closed = await auth(addr, token(5))
        assert op == Opcode.AUTH_OK and not closed
    finally:
        server.close()


async def test_a_live_connection_is_kicked_when_its_token_expires():
    gw = gateway(token_leeway_s=0)
    server, addr = await serve(gw)
    try:
        stream = await open_framed(*parse_addr(addr))
        stream.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5, ttl_s=2)).SerializeToString())
        assert (await asyncio.wait_for(stream.read_frame(), 5))[0] == Opcode.AUTH_OK
        stream.send(Opcode.PING, 2, b"")
        assert (await asyncio.wait_for(stream.read_frame(), 5))[0] == Opcode.PONG  # alive before exp
        op, rid, body = await asyncio.wait_for(stream.read_frame(), 10)
        assert (op, rid) == (Opcode.KICKED, 0)
        assert connection_pb2.Kicked.FromString(body).reason == connection_pb2.Kicked.TOKEN_EXPIRED
        assert await asyncio.wait_for(stream.read_frame(), 5) is None  # then closed
        assert gw.metrics.value("qim_gateway_token_expired_kicks_total") == 1
        assert gw.online._users == {}  # and forgotten
    finally:
        server.close()


async def test_the_connection_cap_refuses_one_more_device_but_not_a_replacement():
    gw = gateway(max_connections_per_user=2)
    server, addr = await serve(gw)
    streams = []
    try:
        for device in (1, 2):
            s = await open_framed(*parse_addr(addr))
            s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5, device)).SerializeToString())
            assert (await asyncio.wait_for(s.read_frame(), 5))[0] == Opcode.AUTH_OK
            streams.append(s)
        op, body, closed = await auth(addr, token(5, 3))
        err = common_pb2.Error.FromString(body)
        assert (op, ErrorCode(err.code)) == (Opcode.ERROR, ErrorCode.RATE_LIMITED) and closed
        assert err.retry_after_ms == CONNECTION_CAP_RETRY_AFTER_MS and "at most 2" in err.message
        assert gw.metrics.value("qim_gateway_rate_limited_total", {"scope": "connection_cap"}) == 1
        op, _, _ = await auth(addr, token(6, 3))  # another user is not affected
        assert op == Opcode.AUTH_OK
        s = await open_framed(*parse_addr(addr))  # device 2 again: replaces, never refused
        s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5, 2)).SerializeToString())
        assert (await asyncio.wait_for(s.read_frame(), 5))[0] == Opcode.AUTH_OK
        op, _, _ = await asyncio.wait_for(streams[1].read_frame(), 5)
        assert op == Opcode.KICKED
        streams.append(s)
    finally:
        for s in streams:
            s.abort()
        server.close()
