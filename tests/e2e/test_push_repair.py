"""No online device is left behind by a lost push (fault 13;
docs/decisions/0012-push-link-repair.md).

Observed before the fix: after a gateway restart the mailbox reconnected its push link
lazily (every 0.5 s) and dropped the pushes in between: devices that had reconnected
and synced did not get a message sent meanwhile (3 of 5 rounds), until the next event.
Expected: B receives A's message within a bounded time in every round; the gateway is
not ready while a mailbox node has no push link to it.
"""

from __future__ import annotations

import asyncio
import random
import re
import urllib.error
import urllib.request

import pytest

from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.fixtures import running_stack

PUSH_DEADLINE_S = 10.0


@pytest.fixture(scope="module")
def repair_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("push")) as st:
        yield st


def healthz(st, name: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{st.metrics[name]}/healthz", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def metric(st, service: str, name: str) -> float:
    text = urllib.request.urlopen(f"http://{st.metrics[service]}/metrics", timeout=3).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


async def login_asap(st, user: int, device: int, timeout: float = 30.0) -> RawClient:
    """Log in as soon as the gateway accepts connections (a device reconnecting in a
    loop does not wait for any readiness signal)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await RawClient.login(st, user, device)
        except (OSError, asyncio.TimeoutError, AssertionError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.02)


async def wait_push(client: RawClient, timeout: float) -> bool:
    """True once a PUSH_EVENTS (with entries or empty: a wake-up) arrives, including one
    that arrived during a request and was kept in `client.pushes` (the push that overtakes
    a pull's empty reply: the SDK pulls again for it, so must this)."""
    for i, (op, _) in enumerate(client.pushes):
        if op == Opcode.PUSH_EVENTS:
            del client.pushes[i]
            return True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            item = await asyncio.wait_for(client.stream.read_frame(), deadline - loop.time())
        except asyncio.TimeoutError:
            return False
        assert item is not None, "connection closed"
        if item[0] == Opcode.PUSH_EVENTS:
            return True
    return False


async def receive_by_push(client: RawClient, cursor: int, timeout: float) -> list[bytes]:
    """What the device gets by pulling on every push (as the SDK does) within `timeout`;
    never pulls without a push."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    got: list[bytes] = []
    while not got and await wait_push(client, deadline - loop.time()):
        entries, cursor = await client.pull_all(cursor)
        got += [e.body for e in entries]
    return got


async def test_after_a_gateway_restart_every_round_delivers_within_a_bounded_time(repair_stack):
    st = repair_stack
    a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    outcome = []
    for round_ in range(5):
        st.stop_service("gateway")
        st.start_service("gateway")
        ca = await login_asap(st, a, 1)
        cb = await login_asap(st, b, 1)
        _, cursor = await cb.pull_all()  # B synced
        cb.pushes.clear()  # a wake-up from before the send must not stand in for its push
        await ca.pull_all()
        body = f"round {round_}".encode()
        op, _ = await ca.send_text(b, body)
        assert op == Opcode.SEND_ACK
        outcome.append(await receive_by_push(cb, cursor, PUSH_DEADLINE_S))
        await ca.close()
        await cb.close()
    dropped = metric(st, "mailbox", "qim_mailbox_push_dropped_total")
    assert outcome == [[f"round {i}".encode()] for i in range(5)], (outcome, f"dropped={dropped}")
    st.wait_ready(["gateway"])


async def test_the_gateway_is_not_ready_without_every_mailbox_push_link(repair_stack):
    st = repair_stack
    st.wait_ready(["gateway"])
    st.kill_service("mailbox")  # crashed: its node lease stays live in the registry until it ends
    for _ in range(50):
        status, body = healthz(st, "gateway")
        if status == 503:
            break
        await asyncio.sleep(0.1)
    assert status == 503 and "no push link from mailbox node(s) mailbox@" in body, (status, body)
    # a device online while the mailbox is away is woken once the node links again
    b = random.getrandbits(40) + 1
    cb = await RawClient.login(st, b, 1)
    st.start_service("mailbox")
    assert await wait_push(cb, 30.0)  # the hello of a new mailbox process wakes its devices
    st.wait_ready(["mailbox", "gateway"])
    assert healthz(st, "gateway")[0] == 200
    await cb.close()
    assert metric(st, "gateway", "qim_gateway_push_wakeups_total") >= 1
    assert metric(st, "mailbox", "qim_mailbox_push_wake_requests_total") >= 1
