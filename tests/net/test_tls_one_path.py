"""One TLS path for every listener (docs/decisions/0119-one-tls-path.md): an internal
listener of a ServiceNode (mutual TLS) accepts ClientLinks as the gateway's client port
does (qim/net/link_server.py, qim/net/link.py), its handler sees the peer's service
name, and a peer that dies in the middle of the handshake is counted ("closed") while
the listener goes on serving the next one (a node never stays alive but deaf).

Over loopback with the development certificates, no engines.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from qim.dev.certs import ensure_dev_pki
from qim.net.framed import FramedStream, open_framed
from qim.net.link import ClientLink
from qim.net.tls import TlsContexts, internal_client_context
from qim.obs.node import ServiceNode
from qim.protocol import Opcode


class Node(ServiceNode):
    service = "writer"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_dev_pki(tmp_path_factory.mktemp("tls"))


async def until(check, what: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.02)


async def test_an_internal_tls_listener_serves_client_links_that_know_their_peer(pki):
    node = Node("127.0.0.1:0")
    await node.start()
    seen: list = []

    async def echo(reader, writer) -> None:
        stream = FramedStream(reader, writer)
        seen.append((type(writer), stream.peer_service))
        item = await stream.read_frame()
        assert item is not None
        stream.send(Opcode.PONG, item[1], item[2])
        await stream.flush()
        stream.close()

    tls = TlsContexts(pki.files("writer"))
    try:
        server = await node.listen("127.0.0.1:0", echo, tls=tls, name="rpc")
        host, port = server.sockets[0].getsockname()[:2]
        client = await open_framed(host, port, timeout=20, tls=internal_client_context(pki.files("gateway")))
        client.send(Opcode.PING, 9, b"hi")
        assert await asyncio.wait_for(client.read_frame(), 20) == (Opcode.PONG, 9, b"hi")
        client.abort()
        assert seen == [(ClientLink, "gateway")]
    finally:
        await node.stop()


async def test_a_peer_dying_during_the_handshake_is_counted_and_the_next_is_served(pki):
    node = Node("127.0.0.1:0")
    await node.start()
    served = asyncio.Event()

    async def serve(reader, writer) -> None:
        served.set()
        writer.close()

    tls = TlsContexts(pki.files("writer"))
    try:
        server = await node.listen("127.0.0.1:0", serve, tls=tls, name="rpc", handshake_timeout=20.0)
        host, port = server.sockets[0].getsockname()[:2]
        # half a ClientHello, then the peer is gone (a reset: the process died)
        raw = socket.create_connection((host, port), timeout=10)
        raw.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]))
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
        failures = lambda: node.metrics_base.value("qim_tls_handshake_failures_total",  # noqa: E731
                                                   {"listener": "rpc", "reason": "closed"})
        await until(lambda: failures() == 1, "the dead peer counted as closed")
        client = await open_framed(host, port, timeout=20, tls=internal_client_context(pki.files("gateway")))
        await asyncio.wait_for(served.wait(), 20)
        client.abort()
    finally:
        await node.stop()
