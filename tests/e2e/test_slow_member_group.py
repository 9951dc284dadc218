"""One member of a group on a slow link, against the real stack (issue 34 item 3,
docs/decisions/0087): it downloads each body once (a page whose bytes are still
arriving is never asked for again, and compressible bodies travel compressed), and
the other members get every message while it is still reading.

Smaller than the report (20 members, 30 x 900 KiB at 100 KiB/s) so it runs in tens of
seconds: 5 members, 4 bodies of 960 KiB (two random, two text-like) at 128 KiB/s. The
slow runtime probes after 0.5 s without a reply (not 3 s), so, as in the report, four
answered probes pass before a random page (~7.5 s of link) has arrived: the old rule
sent the pull again then and the gateway sent the page twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time

from qim.sdk import events as ev
from qim.sdk.requests import create_group
from tests.sdk.faultproxy import FaultProxy
from tests.sdk.realstack import eventually, runtime, shutdown, users

BODY = 960 * 1024
SLOW_BPS = 128 * 1024
UPSTREAM_RCVBUF = 16 * 1024


class SmallBufferProxy(FaultProxy):
    """A FaultProxy whose socket toward the gateway has a small receive buffer
    (UPSTREAM_RCVBUF), as a link whose queue sits in the gateway rather than in the
    kernel: a PONG overtakes the page's queued chunks and comes back within a fraction of
    a second while the page still needs seconds (the report's link)."""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UPSTREAM_RCVBUF)  # before connect: the window
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, self.target)
            up_reader, up_writer = await asyncio.open_connection(sock=sock)
        except OSError:
            sock.close()
            writer.transport.abort()
            return
        self._writers += [writer, up_writer]
        self._spawn(self._pipe(reader, up_writer, self.up_bps))
        self._spawn(self._pipe(up_reader, writer, self.down_bps))


def compressible(i: int) -> bytes:
    """Text-like bytes (zstd takes them to a few percent)."""
    line = f"line {i}: the quick brown fox jumps over the lazy dog, again and again. ".encode()
    return (line * (BODY // len(line) + 1))[:BODY]


def stamp(rt, got: dict) -> None:
    """Record when `rt` was told each message (message_id -> monotonic time)."""
    told = rt.on_event

    def on_event(event) -> None:
        told(event)
        if isinstance(event, ev.MessagesAdded):
            for m in event.messages:
                got.setdefault(m.message_id, time.monotonic())
    rt.on_event = on_event


async def test_slow_member_downloads_each_body_once_and_holds_nobody_back(stack, tmp_path):
    a, slow, *others = users(5)
    bodies = [os.urandom(BODY), compressible(1), os.urandom(BODY), compressible(2)]
    proxy = SmallBufferProxy(stack.gateway_addr, down_bps=SLOW_BPS)
    ra = runtime(stack, tmp_path, a)
    rs = runtime(stack, tmp_path, slow, endpoint=await proxy.start(), auto_reconnect=False, ack_deadline_s=0.5)
    ros = [runtime(stack, tmp_path, u) for u in others]
    got: dict = {rt: {} for rt in (rs, *ros)}
    for rt in got:
        stamp(rt, got[rt])
    try:
        await asyncio.gather(*(rt.connect() for rt in (ra, rs, *ros)))
        ok = await create_group(ra, random.getrandbits(62) + 1, [slow, *others])
        conv = ok.conversation_id
        rx0 = rs.core.conn.bytes_rx
        ids = []
        for body in bodies:
            ids.append((await ra.send_message(conv, 0, body)).message_id)
            await asyncio.sleep(0.5)
        sent_at = time.monotonic()
        for ro in ros:  # the others: every message, whatever the slow member is doing
            await eventually(lambda ro=ro: all(i in got[ro] for i in ids), 120, "the others hold every message")
        others_done = time.monotonic()
        slow_held_then = sum(i in got[rs] for i in ids)
        await eventually(lambda: all(i in got[rs] for i in ids), 180, "the slow member holds every message")
        downloaded = rs.core.conn.bytes_rx - rx0
        print(f"slow member: {downloaded} bytes for {sum(map(len, bodies))} bytes of bodies, "
              f"pull_repeats={rs.stats['pull_repeats']}, others done {others_done - sent_at:.1f} s after the "
              f"last send, slow done {max(got[rs].values()) - sent_at:.1f} s, slow held {slow_held_then}/4 then")
        assert rs.stats["reconnects"] == 0 and not rs.told.of(ev.Disconnected)
        rows = await rs.store.run(rs.store.messages, conv)
        assert [m.body for m in rows if m.message_id in ids] == bodies
        # no page twice, and the compressible half compressed: about the random bodies
        # plus a few percent (frame and entry overhead, the compressed text)
        assert rs.stats["pull_repeats"] == 0
        assert downloaded < 2 * BODY * 1.1, downloaded
        # nobody waits for the slow reader: the others had everything while it still read
        assert slow_held_then < len(bodies)
    finally:
        await shutdown(ra, rs, *ros)
        await proxy.stop()
