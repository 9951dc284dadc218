"""Inline pushes (docs/decisions/0156) through a gateway paused, then one killed, while
inline frames are queued for a device on it, on a private stack of two gateways. The
device leaves for the other gateway (heartbeat, decisions/0082) and every device ends
with every acknowledged message exactly once, in order, equal to a fresh device's sync.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from qim.sdk import Client
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport
from tests.e2e.test_inline_push_attack import store_view, told_once
from tests.fixtures import running_stack
from tests.sdk.realstack import Told, eventually, users


async def open_client(st, data_dir, user: int, device: int, endpoints, **kw) -> Client:
    """A Client of (user, device) over `endpoints` (test_sdk_gateway_failover's tuning),
    `c.told` recording its events."""
    told = Told()
    c = await Client.open(endpoints, issue_dev_token(st.token_key, 0, user, device), data_dir=str(data_dir),
                          event_queue=False, on_event=told, send_timeout=60, probe_s=2.0, **sdk_transport(st), **kw)
    c.told = told
    return c


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("inline-gateways"), nodes={"gateway": 2},
                       extra_env={"QIM_GATEWAY_HEARTBEAT_S": "4"}) as st:
        yield st


def _count(c, conv: bytes, n: int):
    async def check() -> bool:
        return len(await c.store.run(c.store.messages, conv)) == n
    return check


async def test_a_paused_then_a_killed_gateway_mid_burst_leaves_no_device_behind(two_gateways, tmp_path):
    st = two_gateways
    g1, g2 = st.gateway_addrs
    a, b = users(2)
    on_g2 = await open_client(st, tmp_path / "a1", a, 1, [g2, g1], deployment="inline")
    on_g1 = await open_client(st, tmp_path / "a2", a, 2, [g1, g2], deployment="inline2")
    bob = await open_client(st, tmp_path / "b", b, 1, [g1, g2])
    for c in (on_g2, on_g1, bob):
        await c.connect()
    assert on_g2.endpoint == g2
    conv = (await bob.open_direct(a)).conversation_id
    await on_g2.open_direct(b), await on_g1.open_direct(b)
    stop, sent = asyncio.Event(), [0]

    async def burst() -> None:
        while not stop.is_set():
            await bob.send_text(conv, f"m{sent[0]}", wait=False)
            sent[0] += 1
            await asyncio.sleep(0.01)

    task = asyncio.get_running_loop().create_task(burst())
    try:
        await asyncio.sleep(1.0)
        os.kill(st.pids["gateway2"], signal.SIGSTOP)  # frames queued for on_g2 stay in it
        paused = time.monotonic()
        try:
            await eventually(lambda: on_g2.endpoint == g1 and on_g2.connected, timeout=60, what="on_g2 on gateway 1")
            moved = time.monotonic() - paused
        finally:
            os.kill(st.pids["gateway2"], signal.SIGCONT)
        await asyncio.sleep(1.0)
        st.kill_service("gateway")  # gateway 1 (the first instance) holds every device now
        killed = time.monotonic()
        await eventually(lambda: all(c.endpoint == g2 and c.connected for c in (on_g2, on_g1, bob)), timeout=60,
                         what="every device on gateway 2")
        moved_again = time.monotonic() - killed
        await asyncio.sleep(1.0)
        stop.set()
        await task
        await eventually(lambda: _acked(bob), timeout=60, what="bob's sends acknowledged")
        fresh = await open_client(st, tmp_path / "a3", a, 3, [g2], deployment="inline3")
        await fresh.connect()
        try:
            for c in (fresh, on_g2, on_g1, bob):
                await eventually(_count(c, conv, sent[0]), timeout=60, what=f"{sent[0]} at {c.device_id} {c.stats}")
            want = await store_view(fresh, conv)
            assert [r[2] for r in want] == [f"m{i}".encode() for i in range(sent[0])]
            for c in (on_g2, on_g1):
                assert await store_view(c, conv) == want
                assert told_once(c, conv) and len(c.told.messages(conv)) == sent[0]
        finally:
            await fresh.close()
        print(f"gateways: {sent[0]} messages; paused g2 -> moved {moved:.1f} s, killed g1 -> moved {moved_again:.1f} s;",
              [(c.stats.get("pushes_applied", 0), c.stats["pages"]) for c in (on_g2, on_g1)])
    finally:
        stop.set()
        for c in (on_g2, on_g1, bob):
            await c.close()


async def _acked(c) -> bool:
    return not await c.unsent()
