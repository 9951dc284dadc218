"""Internal RPC surfaces a peer's ERROR as an exception, never as reply data (issue 10,
fault 8): a caller that forwarded the (ERROR, body) pair showed clients the internal
opcode. Real loopback server and client."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode, RequestError
from qim.net.rpc import RemoteError, RpcClient, serve_rpc
from qim.protocol import Opcode


async def handler(opcode: int, body: bytes) -> tuple[int, bytes]:
    if body == b"refuse":
        raise RequestError(ErrorCode.FORBIDDEN, "not a member")
    if body == b"crash":
        raise ValueError("bug")
    return Opcode.SEND_ACK, b"ok:" + body


async def test_an_error_reply_raises_remote_error_with_the_peers_code_and_message():
    server = await serve_rpc("127.0.0.1", 0, handler, 8)
    client = RpcClient("127.0.0.1:%d" % server.sockets[0].getsockname()[1])
    assert await client.call(Opcode.WRITER_SEND, b"hi") == (Opcode.SEND_ACK, b"ok:hi")
    with pytest.raises(RemoteError) as exc:
        await client.call(Opcode.WRITER_SEND, b"refuse")
    assert (exc.value.code, exc.value.message) == (ErrorCode.FORBIDDEN, "not a member")
    with pytest.raises(RemoteError) as exc:
        await client.call(Opcode.WRITER_SEND, b"crash")
    assert exc.value.code == ErrorCode.INTERNAL and "bug" not in exc.value.message
    assert await client.call(Opcode.WRITER_SEND, b"again") == (Opcode.SEND_ACK, b"ok:again")  # link intact
    await client.close()
    server.close()


async def test_an_unreachable_peer_is_unavailable_not_remote():
    client = RpcClient("127.0.0.1:1", connect_timeout=0.5)
    with pytest.raises(RequestError) as exc:
        await client.call(Opcode.WRITER_SEND, b"x")
    assert exc.value.code == ErrorCode.UNAVAILABLE and not isinstance(exc.value, RemoteError)


async def test_any_error_of_one_connect_is_unavailable_and_the_next_connect_works(monkeypatch):
    # issue 33 item 2 (decision 0073): uvloop raised RuntimeError on a transport closed
    # under the connect; a caller must see UNAVAILABLE (retry, fail over), never the
    # RuntimeError. A real server; the first connect's wrapping fails as uvloop's did.
    import qim.net.rpc as rpc

    server = await serve_rpc("127.0.0.1", 0, handler, 8)
    real = rpc.open_framed
    failures = [RuntimeError("unable to perform operation on <TCPTransport closed=True>")]

    async def flaky(*args, **kw):
        if failures:
            raise failures.pop()
        return await real(*args, **kw)

    monkeypatch.setattr(rpc, "open_framed", flaky)
    client = RpcClient("127.0.0.1:%d" % server.sockets[0].getsockname()[1])
    with pytest.raises(RequestError) as exc:
        await client.call(Opcode.WRITER_SEND, b"x")
    assert exc.value.code == ErrorCode.UNAVAILABLE and "RuntimeError" in exc.value.message
    assert await client.call(Opcode.WRITER_SEND, b"y") == (Opcode.SEND_ACK, b"ok:y")
    await client.close()
    server.close()
