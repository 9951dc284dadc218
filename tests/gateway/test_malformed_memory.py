"""The gateway's memory under malformed connections (docs/operations.md "Memory under
malformed connections"; docs/decisions/0029-edge-connections-freed-when-they-close.md).

1. Every malformed connection is freed when it closes, by reference counting: none of
   its objects (the ClientConnection and its DeviceSession, its FramedStream, the
   ClientLink or StreamReader, the TLS object) is left to the cyclic garbage collector. Checked on the real listener
   (ServiceNode.listen with TLS, ClientConnection on the stand-in gateway) under both
   event loops, with the collector off during the connections and its findings counted
   after. Before the fix each of these connections left a reference cycle through its
   error's traceback, and the whole connection (256 KiB of TLS read buffer under uvloop)
   waited for a full collection: hundreds of them piled up between two collections.
2. A live qim-gateway process keeps its RSS flat across batches of malformed
   connections (tests/gateway/malformed.py): 7,000 here, growth after the first 1,000
   at most SUITE_BOUND_MB (the old code grew ~20 MB over the same batches); the full
   100,000-connection check is `make soak-malformed` (20 MB after the first 10,000),
   too long for the suite.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import socket
import ssl
import struct

import pytest
import uvloop

from qim._core import frame as frame_codec
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.net.framed import FramedStream
from qim.net.tls import ALPN, client_port_context
from qim.obs.node import ServiceNode
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.services.gateway.conn import ClientConnection
from tests.gateway import standin
from tests.gateway.malformed import lone_gateway, soak

# what a connection of the client port is made of; none may need the cyclic collector
CONNECTION_TYPES = frozenset({"ClientConnection", "DeviceSession", "ClientLink", "FramedStream", "FrameDecoder",
                              "StreamReader", "StreamWriter", "StreamReaderProtocol", "SSLObject", "SSLProtocol",
                              "_SSLProtocolTransport"})
SUITE_BOUND_MB = 10
PER_KIND = 6


class Listener(ServiceNode):
    service = "gateway"

    def __init__(self, files) -> None:
        super().__init__("127.0.0.1:0")
        self.tls = self.tls_contexts(files, "client port", "QIM_GATEWAY_TLS_*", alpn=ALPN)
        self.gw = standin.gateway(auth_timeout_s=0.3)
        self.ended = 0

    async def on_client(self, reader, writer) -> None:
        try:
            await ClientConnection(FramedStream(reader, writer), self.gw).run()
        finally:
            self.ended += 1


def _header_with_a_flipped_bit(bit: int) -> bytes:
    chunk = bytearray(frame_codec.encode_frame(Opcode.AUTH, 1, b"x" * 12, False, 64 * 1024)[0])
    chunk[bit // 8] ^= 1 << (bit % 8)
    return bytes(chunk)


def _client(kind: str, i: int, port: int, tls: ssl.SSLContext) -> None:
    """One malformed connection with a blocking socket (no asyncio objects on this side)."""
    raw = socket.create_connection(("127.0.0.1", port), 10)
    try:
        if kind == "plaintext":
            raw.sendall(b"GET / HTTP/1.1\r\n\r\n" * (i + 1))
            return
        if kind == "partial_hello":
            raw.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(30))
            return
        conn = tls.wrap_socket(raw, server_hostname="127.0.0.1")
        raw = conn
        if kind == "tls_random":
            conn.sendall(bytes((i * 37 + k) % 256 for k in range(7 + 50 * i)))
        elif kind == "tls_header":
            conn.sendall(_header_with_a_flipped_bit(i * 13 % 160))
        elif kind == "tls_truncated":
            conn.sendall(frame_codec.encode_frame(Opcode.PING, 1, b"p" * 40, False, 65536)[0][:30])
        elif kind == "tls_reset":
            conn.sendall(b"\x51\x49\x01")
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif kind == "bad_auth":
            conn.sendall(frame_codec.encode_frame(Opcode.AUTH, 1, connection_pb2.Auth(token="a.b.c").SerializeToString(),
                                                  False, 65536)[0])
        conn.settimeout(5)
        if kind in ("silent", "bad_auth"):  # the gateway closes: AUTH timeout, refused token
            while conn.recv(4096):
                pass
    except OSError:
        pass
    finally:
        raw.close()


KINDS = ("plaintext", "partial_hello", "tls_random", "tls_header", "tls_truncated", "tls_reset", "bad_auth", "silent")


async def _census(files, ca_file: str) -> collections.Counter:
    node = Listener(files)
    await node.start()
    server = await node.listen("127.0.0.1:0", node.on_client, tls=node.tls, name="client", handshake_timeout=5)
    port = server.sockets[0].getsockname()[1]
    tls = client_port_context(ca_file)
    loop = asyncio.get_running_loop()
    found: collections.Counter = collections.Counter()
    gc.collect()
    gc.disable()
    try:
        jobs = [loop.run_in_executor(None, _client, kind, i, port, tls) for kind in KINDS for i in range(PER_KIND)]
        await asyncio.gather(*jobs)
        expected = PER_KIND * (len(KINDS) - 2)  # the two plaintext kinds never reach a ClientConnection
        for _ in range(200):
            if node.ended >= expected:
                break
            await asyncio.sleep(0.05)
        assert node.ended == expected, f"{node.ended} of {expected} connections ended"
        await asyncio.sleep(0.2)  # the last transports finish closing
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found.update(type(o).__name__ for o in gc.garbage if type(o).__name__ in CONNECTION_TYPES)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        await node.stop()
    return found


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
def test_a_malformed_connection_is_freed_when_it_closes_not_by_the_cycle_collector(tmp_path, loop_factory):
    pki = ensure_dev_pki(tmp_path / "tls")
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        found = runner.run(_census(pki.files(CLIENT_PORT), pki.ca_file))
    assert not found, f"connection objects left to the cycle collector: {dict(found)}"


async def test_a_live_gateway_keeps_its_rss_flat_across_batches_of_malformed_connections(tmp_path):
    gateway = lone_gateway(tmp_path / "gateway")
    try:
        rss = await soak(gateway, [1000, 2000, 2000, 2000], report=print)
    finally:
        gateway.stop()
    growth = rss[-1] - rss[0]
    assert growth <= SUITE_BOUND_MB, f"gateway RSS after each batch (MiB): {[round(r) for r in rss]}"


async def _ws_census(tmp) -> collections.Counter:
    from websockets.server import ServerProtocol

    from tests.gateway import wspeer

    found: collections.Counter = collections.Counter()
    async with wspeer.gateway(tmp, auth_timeout_s=0.5) as node:
        gc.collect()
        gc.disable()
        try:
            ping = wspeer.frame(Opcode.PING, 3, b"a" * 40)[0]
            for bad in ([b"x"], ["text"], [ping + ping], [b"q" * 70_000], [b"\x00" + ping[1:]], []):
                ws = await wspeer.ws_client(node)
                for message in bad:  # [] says nothing: the AUTH deadline closes it
                    await ws.send(message)
                await asyncio.wait_for(ws.wait_closed(), 10)
            try:
                await wspeer.ws_client(node, origin="https://evil.example.com")
            except Exception:  # noqa: BLE001 — the refusal is what this connection is for
                pass
            await asyncio.sleep(0.3)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            # the gateway's side only (the test's client is the websockets library's)
            found.update(type(o).__name__ for o in gc.garbage
                         if type(o).__module__.startswith("qim.") or type(o) is ServerProtocol)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    return found


def test_a_malformed_websocket_connection_is_freed_when_it_closes(tmp_path):
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        found = runner.run(_ws_census(tmp_path))
    assert not found, f"gateway objects of WebSocket connections left to the cycle collector: {dict(found)}"
