"""A device whose link fails is never left offline for good (docs/design.md §9; docs/sdk.md
"Connection states"): it is connected, trying again with bounded backoff, or stopped
for a reason it told the app. Against the real stack behind a fault proxy
(tests/sdk/faultproxy.py); every check is on what the app was told: every message
once, in order, and the state events ending in `ready`.
"""

from __future__ import annotations

import asyncio
import os
import random

from qim.sdk import credentials, direct_conversation
from qim.sdk import events as ev
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_send_order import direct, pipeline
from tests.sdk.faultproxy import FaultProxy
from tests.sdk.realstack import eventually, runtime, shutdown, users


async def preload(stack, sender: int, peer: int, count: int, size: int) -> list[bytes]:
    """`count` messages from `sender` to `peer` waiting in the peer's mailbox (frames
    pipelined by a raw client: no SDK code), acknowledged in order."""
    client = await RawClient.login(stack, sender)
    bodies = [b"%05d " % i + os.urandom(size // 2).hex().encode()[:size - 6] for i in range(count)]
    replies = await pipeline(client, [direct(sender, peer, b) for b in bodies])
    assert all(ack.conversation_seq for _, ack in replies)
    await client.close()
    return bodies


def states(rt) -> list[str]:
    return [e.state for e in rt.told.of(ev.ConnectionState)]


async def told_all(rt, conv: bytes, bodies: list[bytes], timeout: float, told=None) -> None:
    """The app was told exactly `bodies`, in order, once each, and the runtime is ready."""
    told = told or rt.told
    try:
        await eventually(lambda: len(told.messages(conv)) >= len(bodies) and rt.connected and rt.state == "ready",
                         timeout=timeout,
                         what=f"{len(bodies)} messages told and ready")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: told {len(told.messages(conv))}, state {rt.state}, "
                             f"states {[(e.state, e.reason) for e in told.of(ev.ConnectionState)][-4:]}") from None
    got = [m.body for m in told.messages(conv)]
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} messages told twice"
    assert got == bodies, f"told {len(got)} of {len(bodies)}, not in send order"
    assert [e.state for e in told.of(ev.ConnectionState)][-1] == "ready"
    stored = await rt.store.run(rt.store.messages, conv)
    assert [m.body for m in stored] == bodies


async def test_a_link_lost_inside_connect_after_auth_is_a_reconnect(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    bodies = await preload(stack, a, b, 300, 300)
    proxy = FaultProxy(stack.gateway_addr, delay_s=0.03, down_bps=60_000)  # the catch-up takes ~2 s
    rb = runtime(stack, tmp_path, b, endpoint=await proxy.start(), reconnect_backoff=(0.05, 0.5))
    cut = []

    def on_state(event) -> None:
        rb.told(event)
        if isinstance(event, ev.ConnectionState) and event.state == "syncing" and not cut:
            cut.append(asyncio.get_running_loop().call_later(0.3, proxy.cut, True))
            asyncio.get_running_loop().call_later(1.0, proxy.restore)

    rb.on_event = on_state
    try:
        await asyncio.wait_for(rb.connect(), 60)  # before: raised NotConnected, offline, never retried
        await told_all(rb, conv, bodies, timeout=60)
        assert rb.stats["reconnects"] >= 1 and "reconnecting" in states(rb)
    finally:
        await shutdown(rb)
        await proxy.stop()


async def test_a_sync_that_ends_on_a_dead_connection_is_retried(stack, tmp_path):
    """The link dies at the very end of a sync, after its last reply: the connect and
    the reconnect that follows both return from a sync whose connection is gone."""
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    bodies = await preload(stack, a, b, 20, 100)
    proxy = FaultProxy(stack.gateway_addr, delay_s=0.03)
    rb = runtime(stack, tmp_path, b, endpoint=await proxy.start(), reconnect_backoff=(0.05, 0.5))
    cuts = [1, 1]  # the connect's sync, then the first reconnect's

    async def cut_at_the_end(_conn) -> None:
        if cuts:
            cuts.pop()
            proxy.cut(reset=True)
            await asyncio.sleep(0.3)
            proxy.restore()

    rb.after_sync.append(cut_at_the_end)
    ra = runtime(stack, tmp_path, a)
    try:
        await asyncio.wait_for(rb.connect(), 60)
        await eventually(lambda: rb.connected, timeout=30, what=f"ready again (state {rb.state})")
        await ra.connect()
        bodies.append(b"after the cuts")
        await ra.send_message(conv, b, bodies[-1])
        await told_all(rb, conv, bodies, timeout=30)
        assert not cuts and rb.stats["reconnects"] >= 2
    finally:
        await shutdown(ra, rb)
        await proxy.stop()


async def test_a_flapping_link_delivers_everything_in_order_and_ends_ready(stack, tmp_path):
    """The issue's first input: a Client behind a link cut and restored every few
    seconds (30 ms one-way delay); messages pile up while it is away and keep coming
    while it catches up, and the next cut lands at a random moment of that catch-up."""
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    proxy = FaultProxy(stack.gateway_addr, delay_s=0.03)
    cb = await client(stack, tmp_path, b, endpoint=await proxy.start(), reconnect_backoff=(0.05, 0.5),
                      ack_deadline_s=1.0, probe_s=1.0)
    ra = runtime(stack, tmp_path, a)
    rng = random.Random()
    bodies: list[bytes] = []
    cmids: list[bytes] = []

    async def send(n: int) -> None:
        for _ in range(n):
            bodies.append(b"flap %04d" % len(bodies))
            cmids.append(await ra.submit_message(conv, b, bodies[-1]))
            await asyncio.sleep(0.004)

    try:
        await ra.connect()
        await cb.connect()
        for _ in range(7):
            proxy.cut(reset=rng.random() < 0.7)
            await send(90)  # while it is away
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            proxy.restore()
            await asyncio.gather(send(30), asyncio.sleep(rng.uniform(0.05, 1.2)))  # while it catches up
        await asyncio.gather(*(ra.wait_ack(c, timeout=120) for c in cmids))
        await told_all(cb.runtime, conv, bodies, timeout=90, told=cb.told)
        assert cb.runtime.stats["reconnects"] >= 1
    finally:
        await close_all(cb)
        await shutdown(ra)
        await proxy.stop()


async def test_token_expiry_during_connects_catch_up_asks_the_provider_and_reconnects(stack, tmp_path, monkeypatch):
    """The issue's second input: a 2 s token with a provider, a slow link, a mailbox that
    takes several sessions to catch up; the gateway ends each at the token's expiry."""
    monkeypatch.setattr(credentials, "REFRESH_MARGIN_S", 0.0)  # use each 2 s token until it expires
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    bodies = await preload(stack, a, b, 350, 400)
    proxy = FaultProxy(stack.gateway_addr, down_bps=12_000)  # ~14 s of catch-up; a session lives 2 + 5 s
    asked: list[int] = []

    def provider() -> str:
        asked.append(1)
        return issue_dev_token(stack.token_key, 0, b, rb.store.device_id, ttl_s=2)

    rb = runtime(stack, tmp_path, b, endpoint=await proxy.start(), token_provider=provider,
                 reconnect_backoff=(0.05, 0.5))
    rb.update_token(issue_dev_token(stack.token_key, 0, b, rb.store.device_id, ttl_s=2))
    try:
        await asyncio.wait_for(rb.connect(), 120)  # before: NotConnected, and no reconnect
        await told_all(rb, conv, bodies, timeout=60)
        assert asked and rb.stats["reconnects"] >= 1
        told = rb.told.of(ev.ConnectionState)
        assert any(e.state == "reconnecting" and e.reason == "token expired" for e in told), told
    finally:
        await shutdown(rb)
        await proxy.stop()
