"""A ClientHello that the event loop reads before the listener's callback runs still
reaches the TLS layer (docs/decisions/0027; since decision 0119 every TLS listener's
connection is a ClientLink, qim/net/link_server.py, which is the socket's protocol from
its first byte).

uvloop starts reading a connection as soon as it is made, so when the client's first
bytes are already there (a client that sends at once, a busy loop) they landed in the
plaintext StreamReader: the handshake hung until its timeout and the client saw its
connection aborted (the writer crash gates failed under uvloop in issue 12, part B).
Here the loop is kept busy while a client connects and sends its ClientHello, so the
bytes are certainly waiting when the loop accepts; both loops must complete the
handshake and carry a frame afterwards."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from qim.dev.certs import ensure_dev_pki
from qim.net.tls import TlsContexts, internal_client_context
from qim.obs.node import ServiceNode

uvloop = pytest.importorskip("uvloop")  # the `server` extra installs it

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


class Node(ServiceNode):
    service = "writer"


def _client(port: int, pki, out: list) -> None:
    """Blocking TLS client: the ClientHello leaves at once on connect."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        with internal_client_context(pki.files("gateway")).wrap_socket(raw) as tls:
            tls.sendall(b"ping")
            out.append(tls.recv(16))
    except OSError as exc:
        out.append(exc)
    finally:
        raw.close()


async def _serve_one(pki) -> tuple[list, float]:
    node = Node("127.0.0.1:0")
    tls = TlsContexts(pki.files("writer"))
    await node.start()

    async def echo(reader, writer) -> None:
        got = b""
        while len(got) < 4:
            data = await reader.read(4 - len(got))
            assert data, "the client closed before its 4 bytes"
            got += data
        writer.write(b"pong:" + got)
        await writer.drain()
        writer.close()

    try:
        server = await node.listen("127.0.0.1:0", echo, tls=tls, name="rpc", handshake_timeout=3.0)
        port = server.sockets[0].getsockname()[1]
        out: list = []
        thread = threading.Thread(target=_client, args=(port, pki, out))
        thread.start()
        # Deliberately block the loop: the kernel completes the TCP handshake and queues
        # the ClientHello before the loop accepts the connection (the order under test).
        time.sleep(0.5)
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
        refused = node.metrics_base.value("qim_tls_handshake_failures_total", {"listener": "rpc", "reason": "timeout"})
        return out, refused
    finally:
        await node.stop()


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_clienthello_read_before_the_callback_reaches_the_tls_layer(tmp_path, loop_name):
    pki = ensure_dev_pki(tmp_path / "tls")
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        out, timeouts = runner.run(_serve_one(pki))
    assert out == [b"pong:ping"], out
    assert timeouts == 0
