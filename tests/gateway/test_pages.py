"""Page replies (qim/services/gateway/pages.py, decision 0087): which pages are sent
compressed, and a repeated PULL_MAILBOX held while the first copy is still queued.
Against a real FramedStream over a socket pair whose peer reads only when told."""

from __future__ import annotations

import asyncio
import os
import socket

from qim._core import frame as frame_codec
from qim.net.framed import FramedStream
from qim.obs.metrics import MetricSet
from qim.protocol import Opcode
from qim.services.gateway.pages import PageReplies, worth_compressing


def text(n: int) -> bytes:
    line = b"the quick brown fox jumps over the lazy dog; "
    return (line * (n // len(line) + 1))[:n]


def test_only_pages_that_compress_are_worth_it():
    assert worth_compressing(text(64 * 1024))
    assert worth_compressing(os.urandom(200 * 1024) + text(200 * 1024))  # half and half
    assert not worth_compressing(os.urandom(200 * 1024))
    assert not worth_compressing(text(8 * 1024))  # below one chunk


async def test_repeat_waits_for_the_first_copy_and_text_leaves_compressed():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    r1, w1 = await asyncio.open_connection(sock=a)
    r2, w2 = await asyncio.open_connection(sock=b)
    stream = FramedStream(r1, w1, chunk_bytes=16 * 1024)
    m = MetricSet()
    pages = PageReplies(stream, m)
    pull = b"\x08\x07"  # any PullMailbox bytes: compared, not parsed
    pages.send(Opcode.PULL_MAILBOX, pull, 5, Opcode.MAILBOX_BATCH, os.urandom(4 * 1024 * 1024 - 64))
    await asyncio.sleep(0.05)
    assert stream.sending(Opcode.MAILBOX_BATCH, 5)  # the peer has not read: still queued
    repeat = asyncio.ensure_future(pages.defer_repeat(Opcode.PULL_MAILBOX, pull))
    other = asyncio.ensure_future(pages.defer_repeat(Opcode.PULL_MAILBOX, b"\x08\x09"))  # another cursor
    await asyncio.sleep(0.1)
    assert other.done() and not repeat.done()
    assert m.value("qim_gateway_page_repeats_deferred_total") == 1
    dec = frame_codec.FrameDecoder()
    got, raw = [], 0
    while not repeat.done():  # the peer reads: the first copy leaves, then the repeat goes on
        data = await asyncio.wait_for(r2.read(65536), 10)
        raw += len(data)
        got += dec.feed(data)
    assert not stream.sending(Opcode.MAILBOX_BATCH, 5)
    pages.send(Opcode.PULL_HISTORY, b"", 6, Opcode.HISTORY_BATCH, text(256 * 1024))
    await stream.flush()
    while not any(f[1] == 6 for f in got):
        data = await asyncio.wait_for(r2.read(65536), 10)
        raw += len(data)
        got += dec.feed(data)
    assert [f[2] for f in got if f[1] == 6] == [text(256 * 1024)]
    assert raw < 4 * 1024 * 1024 + 256 * 20 + 4096  # the random page as it is, the text one compressed
    assert m.value("qim_gateway_page_compressed_total") == 1
    stream.abort()
    w2.close()
