"""A connect that never ends never holds a peer's calls for ever (docs/decisions/0151).

CI once showed a gateway whose first call to the writer failed at connect and which
then answered none of the client's retransmissions for 60 s: no further log line, as if
each later call waited on the RpcClient's connect lock behind a connect that never
ended. The loop's ssl_handshake_timeout does not fire on every hang of start_tls
(CPython < 3.13 and uvloop, the gh-142352 family), so:

- qim.net.tls.connect bounds start_tls by its own timeout plus a slack
  (HANDSHAKE_BOUND_SLACK_S) and closes the transport;
- RpcClient.call's `timeout` bounds a connect the call makes or waits for: RpcTimeout
  (UNAVAILABLE) in time, and the next call connects afresh.

The hang is made with a start_tls (or a whole connect) that never returns; the server
is real (loopback, the development certificates)."""

from __future__ import annotations

import asyncio
import time

import pytest

import qim.net.rpc as rpc
from qim.dev.certs import ensure_dev_pki
from qim.errors import ErrorCode
from qim.net.rpc import RpcClient, RpcTimeout, serve_rpc
from qim.net.tls import HANDSHAKE_BOUND_SLACK_S, HandshakeFailed, connect, internal_client_context
from qim.protocol import Opcode


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_dev_pki(tmp_path_factory.mktemp("tls"))


async def handler(opcode: int, body: bytes) -> tuple[int, bytes]:
    return Opcode.SEND_ACK, b"ok:" + body


async def test_a_start_tls_that_never_returns_is_a_handshake_failure_in_bounded_time(pki, monkeypatch):
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)  # TCP accepted, never TLS
    port = listener.sockets[0].getsockname()[1]
    closed: list = []

    async def hangs(self, *args, **kw):  # a start_tls whose own timeout does not fire
        closed.append(self.transport)
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio.StreamWriter, "start_tls", hangs)
    ctx = internal_client_context(pki.files("gateway"))
    began = time.monotonic()
    with pytest.raises(HandshakeFailed):
        await asyncio.wait_for(connect("127.0.0.1", port, ctx, server_hostname="127.0.0.1", chunk_bytes=16384,
                                       timeout=0.5), 10)  # the test fails (TimeoutError), never hangs
    took = time.monotonic() - began
    assert 0.5 <= took < 0.5 + HANDSHAKE_BOUND_SLACK_S + 2.0, took
    assert closed and closed[0].is_closing()  # nothing stays open
    listener.close()


async def test_a_call_whose_connect_never_ends_times_out_and_the_next_call_connects(monkeypatch):
    server = await serve_rpc("127.0.0.1", 0, handler, 8)
    real = rpc.open_framed
    hung: list = []

    async def first_never_ends(*args, **kw):
        if not hung:
            hung.append(True)
            await asyncio.Event().wait()
        return await real(*args, **kw)

    monkeypatch.setattr(rpc, "open_framed", first_never_ends)
    client = RpcClient("127.0.0.1:%d" % server.sockets[0].getsockname()[1])
    began = time.monotonic()
    with pytest.raises(RpcTimeout) as exc:
        await asyncio.wait_for(client.call(Opcode.WRITER_SEND, b"a", timeout=0.5), 10)
    assert exc.value.code == ErrorCode.UNAVAILABLE and "no connection" in exc.value.message
    assert time.monotonic() - began < 3.0
    # the connect lock was let go: the retransmission connects and is answered
    assert await client.call(Opcode.WRITER_SEND, b"b", timeout=5) == (Opcode.SEND_ACK, b"ok:b")
    await client.close()
    server.close()


async def test_calls_waiting_behind_a_hung_connect_each_end_by_their_own_timeout(monkeypatch):
    server = await serve_rpc("127.0.0.1", 0, handler, 8)
    release = asyncio.Event()
    real = rpc.open_framed

    async def slow(*args, **kw):
        await release.wait()
        return await real(*args, **kw)

    monkeypatch.setattr(rpc, "open_framed", slow)
    client = RpcClient("127.0.0.1:%d" % server.sockets[0].getsockname()[1])
    first = asyncio.ensure_future(client.call(Opcode.WRITER_SEND, b"1", timeout=5))
    await asyncio.sleep(0.05)  # the first holds the connect lock
    with pytest.raises(RpcTimeout):
        await asyncio.wait_for(client.call(Opcode.WRITER_SEND, b"2", timeout=0.3), 10)  # behind the lock: bounded too
    release.set()
    assert await first == (Opcode.SEND_ACK, b"ok:1")
    await client.close()
    server.close()
