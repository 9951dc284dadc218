"""A push link survives any error of one connect attempt (issue 33 item 2;
docs/decisions/0073-links-survive-any-error.md).

Observed before the fix: a gateway SIGKILLed about 1 s after its restart died during a
mailbox node's TLS connect to it; uvloop raised `RuntimeError: unable to perform
operation on <TCPTransport closed=True>`, which the push link's retry loop did not catch:
the link's task ended, GatewayLinks re-raised it and cancelled the node's links to every
gateway, and the node and the restarted gateway stayed at /healthz 503 for minutes.

Here the same RuntimeError is raised at the push link's connect (the fault point
`link_connect:push`, qim/faults.py) three times in each of two rounds of "SIGKILL
gateway2, start it again", on real engines with two gateways. Expected: every service is
healthy again, a message to a device on each gateway is pushed to it, and the failures
are counted (`qim_link_failures_total{link="push",error="FaultInjected"}`) and logged
with their class.
"""

from __future__ import annotations

import asyncio
import random
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from qim.faults import FAULT_FILE
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.test_push_repair import healthz, receive_by_push
from tests.fixtures import running_stack

FAULTS_PER_ROUND = 3
HEALTHY_WITHIN_S = 60.0  # a gateway start plus the link's retries, on a loaded machine
PUSH_DEADLINE_S = 15.0


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("linkfaults"), nodes={"gateway": 2},
                       extra_env={"QIM_FAULT_INJECTION": "1"}) as st:
        yield st


async def _healthy(st, names: list[str]) -> dict[str, tuple[int, str]]:
    """Poll until every named /healthz is 200 or HEALTHY_WITHIN_S passed; the last answers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTHY_WITHIN_S
    while True:
        seen = {n: await asyncio.to_thread(healthz, st, n) for n in names}
        if all(s == 200 for s, _ in seen.values()) or loop.time() > deadline:
            return seen
        await asyncio.sleep(0.5)


async def _login(st, user: int, addr: str) -> RawClient:
    """Log in on the gateway at `addr` as soon as it accepts (within HEALTHY_WITHIN_S)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTHY_WITHIN_S
    while True:
        try:
            return await RawClient.login(st, user, 1, addr=addr)
        except (OSError, asyncio.TimeoutError, AssertionError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


def _failures(st) -> float:
    """qim_link_failures_total{link="push", error="FaultInjected"} of the mailbox node."""
    text = urllib.request.urlopen(f"http://{st.metrics['mailbox']}/metrics", timeout=3).read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "qim_link_failures_total" and s.labels == {"link": "push", "error": "FaultInjected"})


async def test_push_links_survive_an_unexpected_connect_error(two_gateways):
    st = two_gateways
    a, b, c = (random.getrandbits(40) + 1 for _ in range(3))
    gw1, gw2 = st.gateway_addrs
    for round_ in range(2):
        (st.dir / FAULT_FILE).write_text(f"link_connect:push {FAULTS_PER_ROUND} round{round_}\n")
        st.kill_service("gateway2")
        st.start_service("gateway2")
        seen = await _healthy(st, ["mailbox", "gateway", "gateway2"])
        assert all(s == 200 for s, _ in seen.values()), seen
        assert _failures(st) >= FAULTS_PER_ROUND * (round_ + 1)
        # a device on each gateway gets a message sent now by push (and a pull)
        ca = await _login(st, a, gw1)
        cb = await _login(st, b, gw1)
        cc = await _login(st, c, gw2)
        try:
            cursors = {}
            for who in (cb, cc):
                _, cursors[who] = await who.pull_all()
                who.pushes.clear()
            for who in (cb, cc):
                body = f"round {round_} to {who.user}".encode()
                op, _ = await ca.send_text(who.user, body)
                assert op == Opcode.SEND_ACK
                assert await receive_by_push(who, cursors[who], PUSH_DEADLINE_S) == [body], (round_, who.user)
        finally:
            for who in (ca, cb, cc):
                await who.close()
    log = (st.dir / "logs" / "mailbox.log").read_text()
    assert "push link to" in log and "failed, retrying: FaultInjected" in log
