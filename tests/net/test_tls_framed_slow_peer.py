"""FramedStream over TLS toward a slow peer (decision 0011 kept over TLS): a
PONG queued while a 4 MiB frame is stuck follows only a few chunks of it, as in
plaintext (tests/net/test_framed_slow_peer.py). The peer is a raw socket with a small
receive buffer that decrypts with an ssl.MemoryBIO, so the test sees the plaintext
offset at which the PONG's chunk arrived.

Observed before the fix (the TCP transport under asyncio's TLS layer kept its 64 KiB
default write buffer): with 16 KiB chunks the PONG followed 112 KiB of the big frame
(the bound is 96 KiB); 64 KiB with the TCP transport limited to one chunk.
"""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from qim.consts import FRAME_HEADER_LEN
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.net import tls
from qim.net.framed import FramedStream
from qim.net.link_server import LinkServer
from qim.protocol import Opcode
from tests.net.tlspeer import TlsPeer, tls_socket

KIB = 1024


class Node:
    """What a LinkServer uses of its node (qim/net/link_server.py ListenerNode)."""

    stopping = False

    def add_server(self, server) -> None:
        pass

    def track(self, task) -> None:
        pass

    def tls_refused(self, *args) -> None:
        raise AssertionError(f"no refusal expected: {args}")


async def tls_slow_pair(tmp_path, chunk_bytes: int, peer_rcvbuf: int = 8 * KIB):
    """A FramedStream on an accepted TLS ClientLink (the one TLS path: decision 0119)
    and the slow raw peer."""
    pki = ensure_dev_pki(tmp_path / "tls")
    contexts = tls.TlsContexts(pki.files(CLIENT_PORT), alpn=tls.ALPN)
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_link(link):
        stream = FramedStream(link, link, chunk_bytes=chunk_bytes)
        accepted.set_result(stream)
        await stream.wait_closed()  # the test aborts it

    server = await LinkServer(Node(), contexts, on_link, chunk_bytes, 10.0, "test").start("127.0.0.1:0")
    peer = await tls_socket(server.sockets[0].getsockname()[:2], tls.client_port_context(pki.ca_file), peer_rcvbuf)
    return server, await asyncio.wait_for(accepted, 10), peer


async def read_until(peer: TlsPeer, opcode: int, timeout: float = 30.0) -> list[tuple[int, int, int]]:
    """(opcode, request_id, plaintext bytes before this chunk) of every chunk up to the
    first chunk of `opcode`; reads slowly, in small pieces."""
    buf, offset, out = b"", 0, []
    async with asyncio.timeout(timeout):
        while True:
            while len(buf) - offset >= FRAME_HEADER_LEN:
                _, _, _, op, _, rid, body_len, _ = struct.unpack_from(">HBBHHIII", buf, offset)
                if len(buf) - offset < FRAME_HEADER_LEN + body_len:
                    break
                out.append((op, rid, offset))
                offset += FRAME_HEADER_LEN + body_len
                if op == opcode:
                    return out
            buf += await peer.recv(16 * KIB)


@pytest.mark.parametrize("chunk_bytes", [16 * KIB, 64 * KIB])
async def test_a_pong_behind_a_stuck_4mib_frame_follows_only_a_few_chunks_over_tls(tmp_path, chunk_bytes):
    server, stream, peer = await tls_slow_pair(tmp_path, chunk_bytes)
    stream.send(Opcode.MAILBOX_BATCH, 1, os.urandom(4 * 1024 * KIB - 64))
    await asyncio.sleep(0.3)  # the writer filled what the socket and the TLS layer take, and waits
    assert stream.queued_bytes > 3 * 1024 * KIB
    stream.send(Opcode.PONG, 2, b"pong")
    chunks = await read_until(peer, Opcode.PONG)
    before = chunks[-1][2]
    assert chunks[-1][:2] == (Opcode.PONG, 2)
    # the same bound as in plaintext: the TLS layer and the TCP transport under it hold
    # about one chunk each, the kernel about one unsent, the peer's small buffer
    assert before < 4 * chunk_bytes + 32 * KIB, f"the PONG followed {before // KIB} KiB of the big frame"
    peer.sock.close()
    stream.abort()
    server.close()
