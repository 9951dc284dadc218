"""A presence renewal that changes nothing wakes nobody (issue 33 item 6: with a 10 s
QIM_PRESENCE_TTL_MS and 2,400 devices, every renewal made the mailbox wake its device,
about 480 empty pulls a second; docs/decisions/0042-scale-presence.md).

A stack of its own at the shortest TTL (10 s: renewals every 5 s). Devices log in and
sync; over three renewal periods without traffic the gateway republishes every entry
(counted) and queues no PUSH_EVENTS to any device (`qim_gateway_push_frames_total` and
what the devices read). A message sent afterwards still reaches its recipient by push:
the renewed entries keep the targeted pushes going.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.test_push_repair import metric, receive_by_push
from tests.fixtures import running_stack

TTL_MS = 10_000
DEVICES = 12
QUIET_S = 3 * TTL_MS / 2000 + 1.5  # three renewals and a little


@pytest.fixture(scope="module")
def short_ttl_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("presence"), extra_env={"QIM_PRESENCE_TTL_MS": str(TTL_MS)}) as st:
        yield st


async def pushes_read(client: RawClient, within_s: float) -> int:
    """PUSH_EVENTS frames the device reads within `within_s` (kept ones included)."""
    count = sum(1 for op, _ in client.pushes if op == Opcode.PUSH_EVENTS)
    client.pushes.clear()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while (left := deadline - loop.time()) > 0:
        try:
            item = await asyncio.wait_for(client.stream.read_frame(), left)
        except asyncio.TimeoutError:
            break
        assert item is not None, "connection closed"
        count += item[0] == Opcode.PUSH_EVENTS
    return count


async def test_renewals_push_nothing_and_a_message_still_arrives(short_ttl_stack):
    st = short_ttl_stack
    st.wait_ready(["gateway", "mailbox"])
    users = [random.getrandbits(40) + 1 for _ in range(DEVICES)]
    clients = [await RawClient.login(st, u, 1) for u in users]
    cursors = []
    for c in clients:
        cursors.append((await c.pull_all())[1])
    # the logins' own wake-ups (an entry new to the mailbox wakes its device) come first
    await asyncio.gather(*(pushes_read(c, 3.0) for c in clients))

    frames = metric(st, "gateway", "qim_gateway_push_frames_total")
    renewals = metric(st, "gateway", 'qim_gateway_presence_published_total')
    quiet = await asyncio.gather(*(pushes_read(c, QUIET_S) for c in clients))
    renewed = metric(st, "gateway", "qim_gateway_presence_published_total") - renewals
    pushed = metric(st, "gateway", "qim_gateway_push_frames_total") - frames
    assert renewed >= 2 * DEVICES, f"only {renewed} presence records published in {QUIET_S} s: no renewal to test"
    assert pushed == 0 and quiet == [0] * DEVICES, (pushed, quiet)

    sender, recipient = clients[0], clients[1]
    op, _ = await sender.send_text(recipient.user, b"after the renewals")
    assert op == Opcode.SEND_ACK
    assert await receive_by_push(recipient, cursors[1], 20.0) == [b"after the renewals"]
    for c in clients:
        await c.close()
