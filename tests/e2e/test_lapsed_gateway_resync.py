"""A device connected through a lapse of its gateway's node lease ends up with what was
sent to it meanwhile by every service, not only its mailbox (docs/decisions/0154;
qim/services/gateway/lapse.py).

Found by a seam attack (SIGSTOP gateway2 past its 10 s lease, connections kept): user
U's second device marked a conversation read during the pause; the session node dropped
the READ_SYNC for U's first device (its gateway was not listed) and nothing sent it
again: after SIGCONT the first device kept unread 1, its read marks stale until its next
list pull. Now the gateway, once it renewed the lapsed lease, closes its connections
over a short spread and each SDK client reconnects and re-reads the list.
Expected: within RESYNC_DEADLINE_S of SIGCONT, the first device shows the conversation
read (unread 0) and it got there through a new connection.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

from qim.sdk import direct_conversation
from tests.e2e.sdkclient import client
from tests.e2e.test_push_lapsed_gateway import LAPSE_WAIT_S, OWNERS_REFRESH_S, lease_end_ms
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually

RESYNC_DEADLINE_S = 30.0  # the renewal (1 s), the spread (1 s for one connection), the reconnect, loaded host


async def _unread(c, conv: bytes) -> int:
    """The conversation's unread count on `c` (-1 while it does not list it)."""
    return next((x.unread for x in await c.conversations() if x.conversation_id == conv), -1)


def unread_is(c, conv: bytes, n: int):
    """A check for `eventually`: `c` lists `conv` with `n` unread."""
    async def check() -> bool:
        return await _unread(c, conv) == n
    return check


async def test_a_read_on_another_device_during_the_lapse_reaches_the_device_after_it(tmp_path):
    with running_stack(tmp_path, nodes={"gateway": 2}) as st:
        g1, g2 = st.gateway_addrs
        u, s = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        conv = direct_conversation(0, u, s)
        d1 = await client(st, tmp_path, u, 1, endpoint=g2)
        sender = await client(st, tmp_path, s, 1, endpoint=g1)
        await d1.connect()
        await sender.connect()
        await sender.open_direct(u)
        ack = await sender.send_text(conv, "read me elsewhere")
        await eventually(unread_is(d1, conv, 1), what="d1 has the message unread")
        os.kill(st.pids["gateway2"], signal.SIGSTOP)
        try:
            deadline = time.monotonic() + LAPSE_WAIT_S
            while True:
                end, now = lease_end_ms(st, f"gateway@{g2}")
                if end and now > end:
                    break
                assert time.monotonic() < deadline, "gateway2's lease never ended"
                await asyncio.sleep(0.2)
            await asyncio.sleep(OWNERS_REFRESH_S)  # the session node saw gateway2 unlisted
            d2 = await client(st, tmp_path, u, 2, endpoint=g1)
            await d2.connect()
            await eventually(unread_is(d2, conv, 1), what="d2 has the message")
            assert await d2.mark_read(conv, ack.conversation_seq) == ack.conversation_seq
        finally:
            os.kill(st.pids["gateway2"], signal.SIGCONT)
        woke = time.monotonic()

        await eventually(unread_is(d1, conv, 0), timeout=RESYNC_DEADLINE_S, what="d1 shows the read of d2")
        print(f"resync: d1 read {time.monotonic() - woke:.1f} s after SIGCONT")
        log = st.log_tail("gateway2", 40)
        assert "lease lapsed" in log and "reconnect over" in log, log
        for c in (d1, d2, sender):
            await c.close()
